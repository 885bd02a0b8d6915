#include "formats/nvidia_gpu_query.h"

#include <cctype>

#include <fmt/format.h>

#include "formats/text_scan.h"

namespace toposched {

namespace {
// A PCI bus id as nvidia-smi prints it: DOMAIN:BUS:DEVICE.FUNCTION in hex (00000000:07:00.0).
bool looks_like_bus_id(std::string_view s) {
  if (s.size() < 7 || s.find(':') == std::string_view::npos || s.find('.') == std::string_view::npos) return false;
  for (char c : s)
    if (!std::isxdigit(static_cast<unsigned char>(c)) && c != ':' && c != '.') return false;
  return true;
}
}  // namespace

Result<NodeGpuQuery> read_nvidia_gpu_query(std::string_view text, const std::string& file) {
  NodeGpuQuery out;
  for (const TextLine& line : split_lines(text)) {
    std::string_view l = trim(line.text);
    if (l.empty()) continue;
    const auto comma = l.find(',');
    if (comma == std::string_view::npos)
      return make_error(ErrorCode::kParse,
                        fmt::format("expected 'NAME, PCI_BUS_ID' (nvidia-smi --query-gpu=name,pci.bus_id "
                                    "--format=csv), found '{}'",
                                    printable(l)),
                        at(file, line.number, static_cast<int>(l.data() - line.text.data()) + 1));
    std::string_view name = trim(l.substr(0, comma));
    std::string_view rest = l.substr(comma + 1);
    std::string_view bus = trim(rest.substr(0, rest.find(',')));
    if (name == "name" && out.gpus == 0) continue;  // the csv header
    const int bus_col = static_cast<int>(bus.data() - line.text.data()) + 1;
    if (name.empty())
      return make_error(ErrorCode::kParse, "expected a GPU name before the comma, found nothing",
                        at(file, line.number, static_cast<int>(l.data() - line.text.data()) + 1));
    if (!looks_like_bus_id(bus))
      return make_error(ErrorCode::kParse,
                        fmt::format("expected a PCI bus id such as 00000000:07:00.0, found '{}'", printable(bus)),
                        at(file, line.number, bus_col));
    if (out.product.empty()) {
      out.product = std::string(name);
    } else if (name != out.product) {
      out.warnings.push_back(fmt::format("{}:{}: GPU {} is a '{}', GPU 0 a '{}'; the node is modelled as '{}'", file,
                                         line.number, out.gpus, printable(name), out.product, out.product));
    }
    out.bus_ids.emplace_back(bus);
    ++out.gpus;
  }
  if (out.gpus == 0)
    return make_error(ErrorCode::kParse,
                      "expected one 'NAME, PCI_BUS_ID' line per GPU (nvidia-smi --query-gpu=name,pci.bus_id "
                      "--format=csv), found none",
                      at(file, 1, 1));
  return out;
}

}  // namespace toposched
