// Embeds third_party/{vega,vega-lite,vega-embed}/*.min.js into the binary (assembler
// .incbin; TOPOSCHED_THIRD_PARTY_DIR comes from CMakeLists.txt, which also makes this file
// depend on the three scripts), so the HTML reports need nothing at run time.
#include <string_view>

#include "formats/html_page.h"

#ifndef TOPOSCHED_THIRD_PARTY_DIR
#error "TOPOSCHED_THIRD_PARTY_DIR must name the third_party folder"
#endif

#define TOPOSCHED_INCBIN(sym, file)                                              \
  asm(".section .rodata\n"                                                       \
      ".global " #sym "_begin\n"                                                 \
      ".balign 16\n" #sym "_begin:\n"                                            \
      ".incbin \"" TOPOSCHED_THIRD_PARTY_DIR "/" file "\"\n"                     \
      ".global " #sym "_end\n" #sym "_end:\n"                                    \
      ".byte 0\n"                                                                \
      ".previous\n");                                                            \
  extern "C" const char sym##_begin[];                                           \
  extern "C" const char sym##_end[];

TOPOSCHED_INCBIN(toposched_vega_js, "vega/vega.min.js")
TOPOSCHED_INCBIN(toposched_vega_lite_js, "vega-lite/vega-lite.min.js")
TOPOSCHED_INCBIN(toposched_vega_embed_js, "vega-embed/vega-embed.min.js")

namespace toposched::html {

std::string_view vega_js() { return {toposched_vega_js_begin, static_cast<std::size_t>(toposched_vega_js_end - toposched_vega_js_begin)}; }
std::string_view vega_lite_js() {
  return {toposched_vega_lite_js_begin, static_cast<std::size_t>(toposched_vega_lite_js_end - toposched_vega_lite_js_begin)};
}
std::string_view vega_embed_js() {
  return {toposched_vega_embed_js_begin, static_cast<std::size_t>(toposched_vega_embed_js_end - toposched_vega_embed_js_begin)};
}

}  // namespace toposched::html
