// A Kubernetes resource.Quantity as text ("8", "500m", "2113442596Ki", "1.5Gi", "1e3"): the
// grammar of k8s.io/apimachinery/pkg/api/resource (quantity.go): a signed decimal number
// (digits, a point, digits; either side may be empty, not both), then one suffix: a binary SI
// one (Ki Mi Gi Ti Pi Ei), a decimal SI one (n u m "" k M G T P E) or a decimal exponent
// (e or E and a signed integer). Read into a double: exact for every whole quantity below
// 2^53 (a node's memory in bytes, a GPU count); the apimachinery's arbitrary precision is not
// needed for what toposched reads. Pure function; thread-safe.
#pragma once

#include <optional>
#include <string_view>

namespace toposched {

// The quantity's value (bytes for memory, units for counts), or nullopt when `text` is not a
// quantity (an unknown suffix, no digits, spaces, a value whose magnitude passes 1e30).
std::optional<double> parse_k8s_quantity(std::string_view text);

}  // namespace toposched
