#include "formats/nvidia_topo.h"

#include <algorithm>
#include <charconv>
#include <unordered_map>

#include <fmt/format.h>

#include "formats/name_filter.h"
#include "formats/text_scan.h"
#include "topology/hardware.h"

namespace toposched {
namespace {

constexpr int kMaxDevices = 512;

enum class ColumnKind { kGpu, kNic, kCpuAffinity, kNumaAffinity, kGpuNumaId, kOtherAffinity };

struct Column {
  std::string name;
  ColumnKind kind;
  int gpu = -1;  // with kGpu: its index
};

bool is_gpu_label(std::string_view s, int& index) {
  if (s.size() < 4 || s.substr(0, 3) != "GPU") return false;
  auto digits = s.substr(3);
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
  return ec == std::errc() && ptr == digits.data() + digits.size() && index >= 0 && index < kMaxDevices;
}

// Header tokens to columns, joining the multi-word affinity headings.
std::vector<Column> header_columns(const std::vector<Token>& tokens) {
  std::vector<Column> cols;
  for (std::size_t i = 0; i < tokens.size(); ++i) {
    auto word = [&](std::size_t k) { return k < tokens.size() ? tokens[k].text : std::string_view(); };
    if (word(i) == "CPU" && word(i + 1) == "Affinity") {
      cols.push_back({"CPU Affinity", ColumnKind::kCpuAffinity});
      ++i;
    } else if (word(i) == "NUMA" && word(i + 1) == "Affinity") {
      cols.push_back({"NUMA Affinity", ColumnKind::kNumaAffinity});
      ++i;
    } else if (word(i) == "GPU" && word(i + 1) == "NUMA" && word(i + 2) == "ID") {
      cols.push_back({"GPU NUMA ID", ColumnKind::kGpuNumaId});
      i += 2;
    } else if (!cols.empty() && cols.back().kind != ColumnKind::kGpu && cols.back().kind != ColumnKind::kNic) {
      // Any further heading after the affinity columns (future nvidia-smi versions).
      cols.push_back({std::string(word(i)), ColumnKind::kOtherAffinity});
    } else {
      int g = -1;
      if (is_gpu_label(word(i), g))
        cols.push_back({std::string(word(i)), ColumnKind::kGpu, g});
      else
        cols.push_back({std::string(word(i)), ColumnKind::kNic});
    }
  }
  return cols;
}

bool is_header(const std::vector<Token>& t) {
  return !t.empty() && t[0].text == "GPU0" && (t.size() == 1 || (t[1].text != "X" && !parse_link_cell(t[1].text)));
}

// `SOC` is what nvidia-smi before 2017 printed for SYS.
std::optional<GpuLink> parse_cell(std::string_view token) {
  if (token == "SOC") return GpuLink{LinkClass::kSys, 0};
  return parse_link_cell(token);
}


// Matrix column of each GPU index.
std::vector<std::size_t> gpu_columns(const std::vector<Column>& cols, std::size_t devices, int gpus) {
  std::vector<std::size_t> gpu_col(static_cast<std::size_t>(gpus));
  for (std::size_t c = 0; c < devices; ++c)
    if (cols[c].kind == ColumnKind::kGpu) gpu_col[static_cast<std::size_t>(cols[c].gpu)] = c;
  return gpu_col;
}

// The model to use when none was given: the inferred one, else H100; a warning either way.
std::string assumed_gpu_model(const std::vector<std::vector<GpuLink>>& cells, const std::vector<std::size_t>& gpu_col,
                              std::vector<std::string>& warnings) {
  const std::size_t n = gpu_col.size();
  std::vector<int> nvlinks(n * n, 0);
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = 0; b < n; ++b) nvlinks[a * n + b] = cells[gpu_col[a]][gpu_col[b]].nvlinks;
  GpuModelGuess guess = infer_gpu_model(nvlinks, static_cast<int>(n));
  if (!guess.model.empty()) {
    warnings.push_back(fmt::format("GPU model not given: inferred {} from {}; give --gpu-model or --gpu-info if it "
                                   "is another product",
                                   guess.model, guess.reason));
    return guess.model;
  }
  warnings.push_back(fmt::format("GPU model not given and {}: assumed H100 (memory, PCIe Gen5, NVLink speed); give "
                                 "--gpu-model or --gpu-info",
                                 guess.reason));
  return "H100";
}

}  // namespace

GpuModelGuess infer_gpu_model(const std::vector<int>& nvlinks, int gpus) {
  GpuModelGuess g;
  const auto n = static_cast<std::size_t>(std::max(gpus, 0));
  if (n < 2 || nvlinks.size() != n * n) {
    g.reason = "the node has fewer than two GPUs";
    return g;
  }
  int max_pair = 0, max_sum = 0, min_sum = 1 << 30;
  bool every_pair_same = true;
  for (std::size_t a = 0; a < n; ++a) {
    int sum = 0;
    for (std::size_t b = 0; b < n; ++b) {
      if (a == b) continue;
      const int k = nvlinks[a * n + b];
      sum += k;
      max_pair = std::max(max_pair, k);
      every_pair_same = every_pair_same && k == nvlinks[1];
    }
    max_sum = std::max(max_sum, sum);
    min_sum = std::min(min_sum, sum);
  }
  if (max_pair == 0) {
    g.reason = "the matrix has no NVLink";
    return g;
  }
  auto model_of = [](int links) -> std::string_view {
    switch (links) {
      case 18: return "H100";
      case 12: return "A100";
      case 6: return "V100";
      default: return "";
    }
  };
  // NVSwitch board: every pair shows the GPU's whole link count; direct mesh: links add up.
  const bool switched = every_pair_same && n > 2 && !model_of(max_pair).empty();
  const int links = switched ? max_pair : (min_sum == max_sum ? max_sum : 0);
  g.links_per_gpu = links;
  g.model = std::string(model_of(links));
  if (switched)
    g.reason = fmt::format("{} NVLinks per GPU (NV{} to every peer, through NVSwitch)", links, max_pair);
  else if (links > 0)
    g.reason = fmt::format("{} NVLinks per GPU (a direct mesh, NV{} at most between two GPUs)", links, max_pair);
  else
    g.reason = fmt::format("the GPUs have between {} and {} NVLinks each", min_sum, max_sum);
  if (g.model.empty() && links > 0) g.reason = fmt::format("{} NVLinks per GPU match no known product", links);
  if (g.model == "H100") g.reason += "; H200 and B200 look the same";
  return g;
}

namespace {
}  // namespace

bool looks_like_nvidia_topo(std::string_view text) {
  for (const auto& line : split_lines(text.substr(0, 1 << 16)))
    if (is_header(tokenize(line.text))) return true;
  return false;
}

namespace {

// The header: its columns, device columns (GPUs and NICs) first, then affinity columns.
struct Header {
  int line = 0;
  std::vector<Column> cols;
  std::size_t devices = 0;  // cols[0, devices) are GPUs and NICs
  int gpus = 0;
  std::unordered_map<std::string, std::size_t> col_of;  // device column by name
};

Result<Header> read_header(const std::vector<TextLine>& lines, std::size_t h, const std::string& file) {
  Header hd;
  hd.line = lines[h].number;
  hd.cols = header_columns(tokenize(lines[h].text));
  if (hd.cols.size() > kMaxDevices)
    return make_error(ErrorCode::kParse,
                      fmt::format("expected at most {} columns, found {}", kMaxDevices, hd.cols.size()),
                      at(file, hd.line, 1));
  const auto& cols = hd.cols;
  while (hd.devices < cols.size() &&
         (cols[hd.devices].kind == ColumnKind::kGpu || cols[hd.devices].kind == ColumnKind::kNic))
    ++hd.devices;
  for (std::size_t c = 0; c < hd.devices; ++c) {
    if (cols[c].kind == ColumnKind::kGpu) {
      if (cols[c].gpu != hd.gpus)
        return make_error(ErrorCode::kParse,
                          fmt::format("expected GPU columns in order GPU0, GPU1, ...; found '{}' where GPU{} belongs",
                                      cols[c].name, hd.gpus),
                          at(file, hd.line));
      ++hd.gpus;
    }
    if (!hd.col_of.emplace(cols[c].name, c).second)
      return make_error(ErrorCode::kParse,
                        fmt::format("column '{}' appears twice in the header", printable(cols[c].name)),
                        at(file, hd.line));
  }
  return hd;
}

// The matrix: link cells per row (by column index) and the GPU rows' affinities.
struct Matrix {
  std::vector<std::vector<GpuLink>> cells;  // by row column index
  std::vector<int> row_line;
  std::vector<std::vector<int>> cell_col;   // column of each cell, for errors
  std::vector<std::string> cpu_affinity;    // per GPU
  std::vector<int> numa;                    // per GPU, -1 unknown
};

class MatrixReader {
 public:
  MatrixReader(const Header& hd, const std::string& file) : hd_(hd), file_(file), seen_(hd.devices, false) {
    m_.cells.resize(hd.devices);
    m_.row_line.assign(hd.devices, 0);
    m_.cell_col.resize(hd.devices);
    m_.cpu_affinity.resize(static_cast<std::size_t>(hd.gpus));
    m_.numa.assign(static_cast<std::size_t>(hd.gpus), -1);
  }

  // Rows from lines[i], up to the first blank line or the legend; i ends past them.
  Result<Matrix> read(const std::vector<TextLine>& lines, std::size_t& i) {
    for (; i < lines.size(); ++i) {
      const auto tokens = tokenize(lines[i].text);
      if (tokens.empty() || tokens[0].text == "Legend:") break;
      TOPOSCHED_CHECK(read_row(tokens, lines[i]));
    }
    for (std::size_t c = 0; c < hd_.devices; ++c)
      if (hd_.cols[c].kind == ColumnKind::kGpu && !seen_[c])
        return make_error(ErrorCode::kParse, fmt::format("expected a row for '{}', found none", hd_.cols[c].name),
                          at(file_, hd_.line));
    return std::move(m_);
  }

 private:
  Result<void> read_row(const std::vector<Token>& tokens, const TextLine& line) {
    const int ln = line.number;
    auto row_it = hd_.col_of.find(std::string(tokens[0].text));
    if (row_it == hd_.col_of.end())
      return make_error(ErrorCode::kParse,
                        fmt::format("expected a row label naming a header column (GPU0, NIC0, mlx5_0, ...), found '{}'",
                                    printable(tokens[0].text)),
                        at(file_, ln, tokens[0].column));
    const std::size_t r = row_it->second;
    if (seen_[r])
      return make_error(ErrorCode::kParse, fmt::format("row '{}' appears twice", hd_.cols[r].name),
                        at(file_, ln, tokens[0].column));
    seen_[r] = true;
    m_.row_line[r] = ln;
    if (tokens.size() < hd_.devices + 1)
      return make_error(ErrorCode::kParse,
                        fmt::format("row '{}' has {} cells, expected {} (one per GPU and NIC column)", hd_.cols[r].name,
                                    tokens.size() - 1, hd_.devices),
                        at(file_, ln, static_cast<int>(line.text.size()) + 1));
    for (std::size_t c = 0; c < hd_.devices; ++c) TOPOSCHED_CHECK(read_cell(r, c, tokens[c + 1], ln));
    // Affinity values of GPU rows; NIC rows usually have none.
    if (hd_.cols[r].kind == ColumnKind::kGpu) TOPOSCHED_CHECK(read_affinities(r, tokens, ln));
    return {};
  }

  Result<void> read_cell(std::size_t r, std::size_t c, const Token& t, int ln) {
    const auto& cols = hd_.cols;
    auto cell = parse_cell(t.text);
    if (!cell)
      return make_error(
          ErrorCode::kParse,
          fmt::format("row '{}', column '{}': expected X, NV<count>, PIX, PXB, PHB, NODE or SYS, found '{}'",
                      cols[r].name, cols[c].name, printable(t.text)),
          at(file_, ln, t.column));
    if ((cell->cls == LinkClass::kSelf) != (c == r))
      return make_error(ErrorCode::kParse,
                        fmt::format("row '{}', column '{}': expected {}, found '{}'", cols[r].name, cols[c].name,
                                    c == r ? "'X' (a device is itself)" : "a link class ('X' belongs on the diagonal)",
                                    printable(t.text)),
                        at(file_, ln, t.column));
    if (cell->cls == LinkClass::kNVLink && (cols[r].kind != ColumnKind::kGpu || cols[c].kind != ColumnKind::kGpu))
      return make_error(ErrorCode::kParse,
                        fmt::format("row '{}', column '{}': NVLink joins GPUs only; expected a PCIe class "
                                    "(PIX, PXB, PHB, NODE, SYS), found '{}'",
                                    cols[r].name, cols[c].name, printable(t.text)),
                        at(file_, ln, t.column));
    m_.cells[r].push_back(*cell);
    m_.cell_col[r].push_back(t.column);
    return {};
  }

  Result<void> read_affinities(std::size_t r, const std::vector<Token>& tokens, int ln) {
    const auto& cols = hd_.cols;
    const auto g = static_cast<std::size_t>(cols[r].gpu);
    for (std::size_t c = hd_.devices; c < cols.size() && c + 1 < tokens.size(); ++c) {
      const Token& t = tokens[c + 1];
      if (cols[c].kind == ColumnKind::kCpuAffinity && t.text != "N/A") m_.cpu_affinity[g] = std::string(t.text);
      if (cols[c].kind == ColumnKind::kNumaAffinity && t.text != "N/A") {
        int v = -1;
        auto [ptr, ec] = std::from_chars(t.text.data(), t.text.data() + t.text.size(), v);
        if (ec != std::errc() || v < 0 || v > 1'000'000 ||
            (ptr != t.text.data() + t.text.size() && *ptr != ',' && *ptr != '-'))
          return make_error(ErrorCode::kParse,
                            fmt::format("row '{}', column 'NUMA Affinity': expected a NUMA node list such as 0 or "
                                        "0,2-17 or N/A, found '{}'",
                                        cols[r].name, printable(t.text)),
                            at(file_, ln, t.column));
        m_.numa[g] = v;
      }
    }
    if (tokens.size() > cols.size() + 1)
      return make_error(ErrorCode::kParse,
                        fmt::format("row '{}' has {} values, but the header has {} columns", cols[r].name,
                                    tokens.size() - 1, cols.size()),
                        at(file_, ln, tokens[cols.size() + 1].column));
    return {};
  }

  const Header& hd_;
  const std::string& file_;
  std::vector<bool> seen_;
  Matrix m_;
};

// NIC legend: "  NIC0: mlx5_0", after a "NIC Legend:" line at or after lines[i].
std::unordered_map<std::string, std::string> read_nic_legend(const std::vector<TextLine>& lines, std::size_t i) {
  std::unordered_map<std::string, std::string> legend;
  for (; i < lines.size(); ++i) {
    if (trim(lines[i].text) != "NIC Legend:") continue;
    for (++i; i < lines.size(); ++i) {
      std::string_view l = trim(lines[i].text);
      if (l.empty()) {
        if (!legend.empty()) break;
        continue;
      }
      auto colon = l.find(':');
      if (colon == std::string_view::npos) break;
      legend[std::string(trim(l.substr(0, colon)))] = std::string(trim(l.substr(colon + 1)));
    }
    break;
  }
  return legend;
}

// The GPU product's figures on the node type; returns the model used.
std::string set_gpu_product(const Header& hd, const Matrix& m, const TopoMatrixOptions& options, NodeType& t,
                            std::vector<std::string>& warnings) {
  std::string model = options.gpu_model;
  if (model.empty()) model = assumed_gpu_model(m.cells, gpu_columns(hd.cols, hd.devices, hd.gpus), warnings);
  auto product = find_gpu_product(model);
  t.gpu_model = product ? std::string(product->canonical) : model;
  t.gpu_memory_gb = product ? product->memory_gb : 0;
  t.gpu_count = hd.gpus;
  t.pcie_GBps = pcie_GBps(product ? product->pcie_gen : 4, 16);
  t.nvlink_GBps_per_link = options.nvlink_GBps_per_link > 0 ? options.nvlink_GBps_per_link
                           : product                        ? product->nvlink_GBps_per_link
                                                            : 0;
  return model;
}

// The GPU x GPU links, which must be symmetric; NVLinks need a known per-link speed.
Result<void> set_gpu_links(const Header& hd, const Matrix& m, const std::string& model, const std::string& file,
                           NodeType& t) {
  const auto n = static_cast<std::size_t>(hd.gpus);
  const std::vector<std::size_t> gpu_col = gpu_columns(hd.cols, hd.devices, hd.gpus);
  t.gpu_links.resize(n * n);
  int max_links = 0;
  for (std::size_t a = 0; a < n; ++a)
    for (std::size_t b = 0; b < n; ++b) {
      const std::size_t ra = gpu_col[a], cb = gpu_col[b];
      const GpuLink l = m.cells[ra][cb];
      const GpuLink mirror = m.cells[cb][ra];
      if (l != mirror)
        return make_error(ErrorCode::kParse,
                          fmt::format("row 'GPU{}', column 'GPU{}' is '{}' but row 'GPU{}', column 'GPU{}' is '{}'; "
                                      "expected a symmetric GPU matrix",
                                      a, b, link_cell_token(l), b, a, link_cell_token(mirror)),
                          at(file, m.row_line[ra], m.cell_col[ra][cb]));
      t.gpu_links[a * n + b] = l;
      max_links = std::max(max_links, static_cast<int>(l.nvlinks));
    }
  if (max_links > 0 && !(t.nvlink_GBps_per_link > 0))
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("the matrix has NVLinks but GPU model '{}' is unknown, so their speed is too; give a "
                                  "known model (e.g. H100, A100, V100, B200) or the per-link bandwidth",
                                  model),
                      at(file, hd.line));
  if (n > 1 && max_links > 0) {
    auto product = find_gpu_product(model);
    int links = t.link(0, 1).nvlinks;
    t.nvswitch = t.gpu_links == NodeType::full_nvlink_mesh(hd.gpus, links) && product && links >= product->nvlinks_per_gpu;
  }
  return {};
}

// One NIC per NIC column, named by the legend, with its path class to every GPU.
Result<void> add_nics(const Header& hd, const Matrix& m, const std::unordered_map<std::string, std::string>& legend,
                      const TopoMatrixOptions& options, TopoMatrix& out) {
  std::optional<NameFilter> compute_re;
  if (options.compute_nic_regex) {
    auto f = NameFilter::compile(*options.compute_nic_regex, "compute NIC filter");
    if (!f) return tl::unexpected(f.error());
    compute_re = *f;
  }
  const std::vector<std::size_t> gpu_col = gpu_columns(hd.cols, hd.devices, hd.gpus);
  for (std::size_t c = 0; c < hd.devices; ++c) {
    const Column& col = hd.cols[c];
    if (col.kind != ColumnKind::kNic) continue;
    Nic nic;
    nic.name = col.name;
    if (auto it = legend.find(col.name); it != legend.end() && !it->second.empty()) {
      nic.name = it->second;
    } else if (col.name.starts_with("NIC")) {
      out.warnings.push_back(
          fmt::format("column '{}' has no entry in the NIC legend; naming the NIC '{}'", col.name, col.name));
    }
    nic.gbit = options.nic_gbit;
    for (std::size_t g = 0; g < gpu_col.size(); ++g) nic.gpu_affinity.push_back(m.cells[gpu_col[g]][c].cls);
    if (compute_re) nic.compute = compute_re->matches(nic.name);
    out.type.nics.push_back(std::move(nic));
  }
  return {};
}

}  // namespace

Result<TopoMatrix> read_nvidia_topo(std::string_view text, const std::string& file, const TopoMatrixOptions& options) {
  const auto lines = split_lines(text);
  std::size_t h = 0;
  while (h < lines.size() && !is_header(tokenize(lines[h].text))) ++h;
  if (h == lines.size())
    return make_error(ErrorCode::kParse,
                      "expected `nvidia-smi topo -m` output: a header line starting with GPU0, found none",
                      at(file, lines.empty() ? 1 : lines.front().number, 1));
  TOPOSCHED_TRY(hd, read_header(lines, h, file));
  std::size_t i = h + 1;
  TOPOSCHED_TRY(m, MatrixReader(hd, file).read(lines, i));
  const auto legend = read_nic_legend(lines, i);

  TopoMatrix out;
  const std::string model = set_gpu_product(hd, m, options, out.type, out.warnings);
  TOPOSCHED_CHECK(set_gpu_links(hd, m, model, file, out.type));
  TOPOSCHED_CHECK(add_nics(hd, m, legend, options, out));
  if (std::any_of(m.cpu_affinity.begin(), m.cpu_affinity.end(), [](const std::string& s) { return !s.empty(); }))
    out.type.gpu_cpu_affinity = m.cpu_affinity;
  if (std::any_of(m.numa.begin(), m.numa.end(), [](int v) { return v >= 0; })) out.type.gpu_numa = m.numa;
  return out;
}

}  // namespace toposched
