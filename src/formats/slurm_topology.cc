#include "formats/slurm_topology.h"

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include <fmt/format.h>

#include "formats/text_scan.h"
#include "topology/hostlist.h"
#include "topology/text.h"

namespace toposched {
namespace {

// One statement after comments are removed and continuations joined; every character
// can say where it came from. Positions are kept per source line piece (not per
// character), so memory stays proportional to the text.
struct Statement {
  struct Piece {
    std::size_t offset = 0;  // first character of the piece in `text`
    int line = 0;
    int column = 0;  // 1-based column of that character in its line
  };
  std::string text;
  std::vector<Piece> pieces;  // in increasing offset; the first has offset 0

  void append(std::string_view s, int line, int column) {
    pieces.push_back({text.size(), line, column});
    text += s;
  }
  SourceLocation at(std::size_t i) const {
    auto next = std::upper_bound(pieces.begin(), pieces.end(), i,
                                 [](std::size_t x, const Piece& p) { return x < p.offset; });
    if (next == pieces.begin()) return {"", 0, 0};
    const Piece& p = *std::prev(next);
    return {"", p.line, p.column + static_cast<int>(i - p.offset)};
  }
};

std::vector<Statement> statements(std::string_view text) {
  std::vector<Statement> out;
  Statement cur;
  for (const auto& line : split_lines(text)) {
    std::string_view s = line.text;
    auto hash = s.find('#');
    if (hash != std::string_view::npos) s = s.substr(0, hash);
    std::size_t end = s.size();
    while (end > 0 && std::isspace(static_cast<unsigned char>(s[end - 1]))) --end;
    const bool continued = end > 0 && s[end - 1] == '\\';
    if (continued) --end;
    if (end > 0) cur.append(s.substr(0, end), line.number, 1);
    if (continued) {
      cur.append(" ", line.number, static_cast<int>(end) + 1);
      continue;
    }
    if (!trim(cur.text).empty()) out.push_back(std::move(cur));
    cur = Statement{};
  }
  if (!trim(cur.text).empty()) out.push_back(std::move(cur));
  return out;
}

struct Field {
  std::string key;  // lower case
  std::string value;
  SourceLocation key_at, value_at;
};

struct SwitchRec {
  std::string name;
  SourceLocation at;
  std::vector<std::string> children;
  std::vector<SourceLocation> child_at;
  int parent = -1;
  int height = 0;
};

// Reads a topology.conf in named steps: each statement is split into fields and read as a
// switch, a block or a block-sizes line; then the switches are linked to their parents,
// their heights found, and the tree emitted. One reader per call.
class SlurmTopologyReader {
 public:
  explicit SlurmTopologyReader(const std::string& file) : file_(file) { out_.source = file; }

  Result<DiscoveredTopology> read(std::string_view text) {
    for (const Statement& st : statements(text)) TOPOSCHED_CHECK(read_statement(st));
    if (!tree_ && !block_)
      return make_error(ErrorCode::kParse, "expected SwitchName= or BlockName= statements, found none", at(file_, 1, 1));
    TOPOSCHED_CHECK(link_parents());
    TOPOSCHED_TRY(max_height, switch_heights());
    if (tree_) emit_tree(max_height);
    return std::move(out_);
  }

 private:
  SourceLocation where(SourceLocation l) const {
    l.file = file_;
    return l;
  }

  Result<std::vector<Field>> fields_of(const Statement& st) const {
    std::vector<Field> fields;
    for (const Token& t : tokenize(st.text)) {
      const auto start = static_cast<std::size_t>(t.column - 1);
      auto eq = t.text.find('=');
      if (eq == std::string_view::npos && !fields.empty() && fields.back().value.ends_with(',')) {
        // "Nodes=a[1-4],\" continued by "  b1": the value goes on after the line break.
        fields.back().value += t.text;
        continue;
      }
      if (eq == std::string_view::npos || eq == 0)
        return make_error(ErrorCode::kParse,
                          fmt::format("expected KEY=VALUE (SwitchName=, Switches=, Nodes=, LinkSpeed=, Level=, "
                                      "BlockName=, BlockSizes=), found '{}'",
                                      printable(t.text)),
                          where(st.at(start)));
      Field f;
      f.key = ascii_lower(t.text.substr(0, eq));
      f.value = std::string(t.text.substr(eq + 1));
      f.key_at = st.at(start);
      f.value_at = st.at(std::min(start + eq + 1, st.text.size() - 1));
      if (f.value.size() >= 2 && f.value.front() == '"' && f.value.back() == '"')
        f.value = f.value.substr(1, f.value.size() - 2);
      fields.push_back(std::move(f));
    }
    return fields;
  }

  Result<void> read_statement(const Statement& st) {
    TOPOSCHED_TRY(fields, fields_of(st));
    const Field& head = fields.front();
    if (head.key == "switchname") {
      tree_ = true;
      TOPOSCHED_CHECK(read_switch(fields));
    } else if (head.key == "blockname") {
      block_ = true;
      TOPOSCHED_CHECK(read_block(fields));
    } else if (head.key == "blocksizes") {
      block_ = true;
      TOPOSCHED_CHECK(read_block_sizes(fields));
    } else {
      return make_error(ErrorCode::kParse,
                        fmt::format("expected a statement starting with SwitchName=, BlockName= or BlockSizes=, found "
                                    "'{}='",
                                    printable(head.key)),
                        where(head.key_at));
    }
    if (tree_ && block_)
      return make_error(ErrorCode::kParse,
                        "this file mixes tree statements (SwitchName=) and block statements (BlockName=, BlockSizes=); "
                        "Slurm reads one topology plugin per file",
                        where(head.key_at));
    return {};
  }

  Result<std::vector<std::string>> hostlist(const Field& f) const {
    auto names = expand_hostlist(f.value);
    if (!names) {
      SourceLocation l = f.value_at;
      if (names.error().where.column > 0) l.column += names.error().where.column - 1;
      return make_error(ErrorCode::kParse,
                        fmt::format("in {} hostlist '{}': {}", f.key == "nodes" ? "Nodes" : "Switches",
                                    printable(f.value), names.error().message),
                        where(l));
    }
    return names;
  }

  tl::unexpected<Error> unknown_key(const Field& f, std::string_view allowed) const {
    return make_error(ErrorCode::kParse, fmt::format("unknown key '{}' here; expected {}", printable(f.key), allowed),
                      where(f.key_at));
  }

  bool add_node(const std::string& name, const std::string& sw, const std::string& domain, SourceLocation at) {
    auto [it, inserted] = node_index_.try_emplace(name, out_.nodes.size());
    if (inserted) {
      DiscoveredNode n;
      n.name = name;
      n.switch_name = sw;
      n.domain = domain;
      out_.nodes.push_back(std::move(n));
      return true;
    }
    const DiscoveredNode& prev = out_.nodes[it->second];
    out_.warnings.push_back(fmt::format("line {}: node '{}' is already under {} '{}'; keeping it there", at.line, name,
                                        sw.empty() ? "block" : "switch", sw.empty() ? prev.domain : prev.switch_name));
    return false;
  }

  // SwitchName=NAME [Nodes=HOSTLIST] [Switches=HOSTLIST] [LinkSpeed=N], and what `scontrol show
  // topology` prints for a switch, `SwitchName=NAME Level=N LinkSpeed=N [Nodes=...]
  // [Switches=...]`: there a switch above others lists all the nodes below it (slurmctld's
  // tree, topology_tree.c), which the leaves it lists already place.
  Result<void> read_switch(const std::vector<Field>& fields) {
    const Field& head = fields.front();
    if (head.value.empty())
      return make_error(ErrorCode::kParse, "expected a switch name after SwitchName=", where(head.value_at));
    if (switch_index_.contains(head.value))
      return make_error(ErrorCode::kParse, fmt::format("switch '{}' is defined twice", printable(head.value)),
                        where(head.value_at));
    const auto id = switches_.size();
    switch_index_.emplace(head.value, static_cast<int>(id));
    switches_.push_back({head.value, head.value_at, {}, {}, -1, 0});
    std::vector<const Field*> nodes;  // every Nodes= field, in order
    bool shown_by_scontrol = false;
    for (std::size_t k = 1; k < fields.size(); ++k) {
      const Field& f = fields[k];
      if (f.key == "nodes") {
        nodes.push_back(&f);
      } else if (f.key == "level") {
        if (f.value.empty() || !std::all_of(f.value.begin(), f.value.end(),
                                            [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
          return make_error(ErrorCode::kParse,
                            fmt::format("expected Level= a whole number (scontrol show topology's switch level), found "
                                        "'{}'",
                                        printable(f.value)),
                            where(f.value_at));
        shown_by_scontrol = true;
      } else if (f.key == "switches") {
        TOPOSCHED_TRY(names, hostlist(f));
        for (auto& n : names) {
          // Point at the child's own name when it is written out in the value.
          SourceLocation child_at = f.value_at;
          if (auto off = f.value.find(n); off != std::string::npos) child_at.column += static_cast<int>(off);
          switches_[id].children.push_back(std::move(n));
          switches_[id].child_at.push_back(child_at);
        }
      } else if (f.key == "linkspeed") {
        // Slurm uses it only as a relative weight; the model takes bandwidths from the NICs.
      } else {
        return unknown_key(f, "Switches=, Nodes=, LinkSpeed= or Level= after SwitchName=");
      }
    }
    if (shown_by_scontrol && !switches_[id].children.empty()) return {};
    for (const Field* f : nodes) {
      TOPOSCHED_TRY(names, hostlist(*f));
      for (const auto& n : names) add_node(n, head.value, "", f->value_at);
    }
    return {};
  }

  // BlockName=NAME Nodes=HOSTLIST...
  Result<void> read_block(const std::vector<Field>& fields) {
    const Field& head = fields.front();
    if (head.value.empty())
      return make_error(ErrorCode::kParse, "expected a block name after BlockName=", where(head.value_at));
    bool any = false;
    for (std::size_t k = 1; k < fields.size(); ++k) {
      const Field& f = fields[k];
      if (f.key == "blockindex") continue;  // scontrol show topology's block number
      if (f.key != "nodes") return unknown_key(f, "Nodes= after BlockName=");
      TOPOSCHED_TRY(names, hostlist(f));
      for (const auto& n : names) any = add_node(n, "", head.value, f.value_at) || any;
    }
    if (!any)
      out_.warnings.push_back(fmt::format("line {}: block '{}' has no nodes of its own", head.key_at.line, head.value));
    return {};
  }

  // BlockSizes=N[,N...]: checked for form only (the model derives block sizes itself).
  Result<void> read_block_sizes(const std::vector<Field>& fields) const {
    const Field& head = fields.front();
    if (fields.size() > 1) return unknown_key(fields[1], "nothing else on a BlockSizes= line");
    const std::string_view part = head.value;
    std::size_t start = 0;
    while (start <= part.size()) {
      auto comma = part.find(',', start);
      std::string_view v = part.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
      if (v.empty() ||
          !std::all_of(v.begin(), v.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); }))
        return make_error(
            ErrorCode::kParse,
            fmt::format("expected BlockSizes as numbers separated by commas, found '{}'", printable(head.value)),
            where(head.value_at));
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    return {};
  }

  // Each switch's parent, from the Switches= lists (the first listing wins: the model is a tree).
  Result<void> link_parents() {
    for (std::size_t s = 0; s < switches_.size(); ++s)
      for (std::size_t c = 0; c < switches_[s].children.size(); ++c) {
        const std::string& child = switches_[s].children[c];
        auto it = switch_index_.find(child);
        if (it == switch_index_.end())
          return make_error(ErrorCode::kParse,
                            fmt::format("switch '{}' lists switch '{}', which no SwitchName= line defines",
                                        switches_[s].name, printable(child)),
                            where(switches_[s].child_at[c]));
        SwitchRec& ch = switches_[static_cast<std::size_t>(it->second)];
        if (it->second == static_cast<int>(s))
          return make_error(ErrorCode::kParse, fmt::format("switch '{}' lists itself", ch.name),
                            where(switches_[s].child_at[c]));
        if (ch.parent >= 0 && ch.parent != static_cast<int>(s)) {
          out_.warnings.push_back(
              fmt::format("line {}: switch '{}' is also listed under '{}'; keeping it under '{}' (the "
                          "model is a tree)",
                          switches_[s].child_at[c].line, ch.name, switches_[s].name,
                          switches_[static_cast<std::size_t>(ch.parent)].name));
          continue;
        }
        ch.parent = static_cast<int>(s);
      }
    return {};
  }

  // Heights in Kahn's order from the leaves; what is left over is a cycle. Returns the
  // greatest height.
  Result<int> switch_heights() {
    std::vector<int> pending(switches_.size(), 0);
    for (const auto& s : switches_)
      if (s.parent >= 0) ++pending[static_cast<std::size_t>(s.parent)];
    std::vector<int> queue;
    for (std::size_t s = 0; s < switches_.size(); ++s)
      if (pending[s] == 0) queue.push_back(static_cast<int>(s));
    std::size_t done = 0;
    int max_height = 0;
    while (done < queue.size()) {
      const SwitchRec& s = switches_[static_cast<std::size_t>(queue[done++])];
      max_height = std::max(max_height, s.height);
      if (s.parent < 0) continue;
      SwitchRec& p = switches_[static_cast<std::size_t>(s.parent)];
      p.height = std::max(p.height, s.height + 1);
      if (--pending[static_cast<std::size_t>(s.parent)] == 0) queue.push_back(s.parent);
    }
    if (done < switches_.size()) {
      for (std::size_t s = 0; s < switches_.size(); ++s)
        if (pending[s] > 0)
          return make_error(ErrorCode::kParse,
                            fmt::format("switch '{}' is part of a cycle of switches", switches_[s].name),
                            where(switches_[s].at));
    }
    return max_height;
  }

  void emit_tree(int max_height) {
    for (int t = 0; t <= max_height; ++t) out_.tiers.push_back(tier_name_for_level(t));
    for (const auto& s : switches_)
      out_.switches.push_back(
          {s.name, s.height, s.parent >= 0 ? switches_[static_cast<std::size_t>(s.parent)].name : ""});
  }

  const std::string& file_;
  DiscoveredTopology out_;
  std::vector<SwitchRec> switches_;
  std::unordered_map<std::string, int> switch_index_;
  std::unordered_map<std::string, std::size_t> node_index_;
  bool tree_ = false, block_ = false;
};

}  // namespace

bool looks_like_slurm_topology(std::string_view text) {
  for (const auto& st : statements(text.substr(0, 1 << 16))) {
    std::string t = ascii_lower(trim(st.text));
    return t.starts_with("switchname=") || t.starts_with("blockname=") || t.starts_with("blocksizes=");
  }
  return false;
}

Result<DiscoveredTopology> read_slurm_topology(std::string_view text, const std::string& file) {
  return SlurmTopologyReader(file).read(text);
}

}  // namespace toposched
