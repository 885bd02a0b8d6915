// parse_k8s_quantity against the resource.Quantity grammar of k8s.io/apimachinery
// (quantity.go): the forms kubelet and users write, and text the grammar refuses.
#include <gtest/gtest.h>

#include <string>

#include "formats/k8s_quantity.h"

namespace toposched {
namespace {

TEST(K8sQuantity, ReadsEverySuffixKind) {
  EXPECT_EQ(parse_k8s_quantity("8"), 8.0);
  EXPECT_EQ(parse_k8s_quantity("2113442596Ki"), 2113442596.0 * 1024);  // kubelet's MemTotal
  EXPECT_EQ(parse_k8s_quantity("2Ti"), 2199023255552.0);
  EXPECT_EQ(parse_k8s_quantity("1.5Gi"), 1610612736.0);
  EXPECT_EQ(parse_k8s_quantity("1Ei"), 1152921504606846976.0);
  EXPECT_EQ(parse_k8s_quantity("500m"), 0.5);
  EXPECT_EQ(parse_k8s_quantity("3k"), 3000.0);
  EXPECT_EQ(parse_k8s_quantity("2P"), 2e15);
  EXPECT_EQ(parse_k8s_quantity("1e3"), 1000.0);
  EXPECT_EQ(parse_k8s_quantity("1E+3"), 1000.0);
  EXPECT_EQ(parse_k8s_quantity("25e-1"), 2.5);
  EXPECT_EQ(parse_k8s_quantity("+5."), 5.0);
  EXPECT_EQ(parse_k8s_quantity("-.5"), -0.5);
}

TEST(K8sQuantity, RefusesWhatTheGrammarRefuses) {
  for (const std::string bad : {"", " ", "Ki", ".", "+", "-", "1 Ki", " 1", "1 ", "1KI", "1ki", "1TB", "1e",
                                "1e+-3", "1e1.5", "1..5", "1.5.", "0x10", "e3", "1e400", "nan", "inf"})
    EXPECT_FALSE(parse_k8s_quantity(bad).has_value()) << "'" << bad << "'";
}

}  // namespace
}  // namespace toposched
