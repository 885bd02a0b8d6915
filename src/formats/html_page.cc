#include "formats/html_page.h"

namespace toposched::html {

std::string escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string script_json(const nlohmann::ordered_json& j) {
  std::string s = j.dump();
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    if (c == '<') out += "\\u003c";
    else out += c;
  }
  return out;
}

namespace {

void append_head(std::string& out, const std::string& title) {
  out += "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" + escape(title) + "</title>\n";
  out += "<style>body{font-family:system-ui,sans-serif;margin:24px;color:#222}table{border-collapse:collapse;margin:12px 0}"
         "td,th{border:1px solid #ccc;padding:4px 10px;text-align:right}thead th{background:#f2f2f2}"
         ".charts{display:flex;flex-wrap:wrap;gap:16px}.chart{min-width:600px;min-height:320px}</style>\n";
  out += "<script>window.__reportErrors=[];window.addEventListener('error',function(e){window.__reportErrors.push(String(e.message));"
         "document.body&&document.body.setAttribute('data-charts','error: '+e.message);});</script>\n";
  out += "<script>/* Vega (BSD-3-Clause), third_party/vega */\n";
  out += vega_js();
  out += "\n</script>\n<script>/* Vega-Lite (BSD-3-Clause), third_party/vega-lite */\n";
  out += vega_lite_js();
  out += "\n</script>\n<script>/* vega-embed (BSD-3-Clause), third_party/vega-embed */\n";
  out += vega_embed_js();
  out += "\n</script>\n</head>\n";
}

// Embeds every chart, then checks that each drew something before it reports "ok".
constexpr std::string_view kEmbedScript = R"JS(var ids=Object.keys(specs);
function fail(e){window.__reportErrors.push(String(e));document.body.setAttribute('data-charts','error: '+e);}
try{
Promise.all(ids.map(function(id){return vegaEmbed('#'+id,specs[id],{actions:false,renderer:'svg'});}))
.then(function(){
  var bad=ids.filter(function(id){var s=document.querySelector('#'+id+' svg');return !s||s.querySelectorAll('path,rect,line').length===0;});
  if(bad.length){fail('empty chart: '+bad.join(','));return;}
  if(window.__reportErrors.length){fail(window.__reportErrors[0]);return;}
  document.body.setAttribute('data-charts','ok');
  document.body.setAttribute('data-charts-count',String(ids.length));
}).catch(fail);
}catch(e){fail(e);}
})();
</script>
</body>
</html>
)JS";

}  // namespace

std::string render_chart_page(const ChartPage& page) {
  std::string out;
  out.reserve(vega_js().size() + vega_lite_js().size() + vega_embed_js().size() + 200000);
  append_head(out, page.title);
  out += "<body data-charts=\"pending\">\n";
  out += "<h1>" + escape(page.title) + "</h1>\n";
  out += page.intro_html;
  out += "<h2>Summary</h2>\n" + page.summary_html + "\n<h2>Charts</h2>\n<div class=\"charts\">\n";
  for (auto it = page.charts.begin(); it != page.charts.end(); ++it) out += "<div class=\"chart\" id=\"" + it.key() + "\"></div>\n";
  out += "</div>\n<script>\n(function(){\nvar specs=" + script_json(page.charts) + ";\n";
  out += kEmbedScript;
  return out;
}

}  // namespace toposched::html
