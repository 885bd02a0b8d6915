// The shell of toposched's self-contained HTML reports (`simulate`, `route`, later `scale`):
// one page with a summary table and Vega-Lite charts, the plotting libraries (Vega,
// Vega-Lite, vega-embed, vendored in third_party/) inlined so the page needs nothing at run
// time. When every chart has rendered, the page sets data-charts="ok" on <body>
// (data-charts="error: ..." otherwise), which the browser tests check.
// It lives in formats/ because it is an output format that both sim/ and router/ (peers
// above placement) write; it knows nothing of jobs or requests.
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace toposched::html {

// Text safe inside HTML element content and attribute values.
std::string escape(std::string_view s);

// JSON safe to place inside <script>: no "</" sequence can close the element.
std::string script_json(const nlohmann::ordered_json& j);

struct ChartPage {
  std::string title;          // <title> and <h1>, plain text
  std::string intro_html;     // one paragraph (or more) under the heading, already HTML
  std::string summary_html;   // the summary table, already HTML
  nlohmann::ordered_json charts = nlohmann::ordered_json::object();  // element id -> Vega-Lite spec
};

// The whole page. Byte-stable: the same inputs give the same bytes.
std::string render_chart_page(const ChartPage& page);

// The vendored plotting libraries, embedded in the binary at build time (html_assets.cc).
std::string_view vega_js();
std::string_view vega_lite_js();
std::string_view vega_embed_js();

}  // namespace toposched::html
