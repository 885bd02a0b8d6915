// Registry<T>: lookup by name and alias, the one unknown-name error, names in row order.
#include "topology/registry.h"

#include <gtest/gtest.h>

namespace toposched {
namespace {

enum class Fruit { kApple, kPear, kPlum };

const Registry<Fruit>& fruits() {
  static const Registry<Fruit> kFruits("fruit", {{"apple", "red or green", Fruit::kApple},
                                                 {"pear", "pear-shaped", Fruit::kPear, {"poire"}},
                                                 {"plum", "purple", Fruit::kPlum}});
  return kFruits;
}

TEST(Registry, FindsNamesAndAliases) {
  EXPECT_EQ(fruits().find("apple"), Fruit::kApple);
  EXPECT_EQ(fruits().find("poire"), Fruit::kPear);
  ASSERT_NE(fruits().row("plum"), nullptr);
  EXPECT_EQ(fruits().row("plum")->description, "purple");
  EXPECT_TRUE(fruits().contains("pear"));
  EXPECT_FALSE(fruits().contains("Pear"));  // exact: a caller that folds case lowers first
}

TEST(Registry, UnknownNameIsOneInvalidArgumentListingTheNames) {
  auto r = fruits().find("kiwi");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().message, "unknown fruit 'kiwi'; known: apple, pear, plum");
}

TEST(Registry, NamesInRowOrderWithoutAliases) {
  EXPECT_EQ(fruits().names(), (std::vector<std::string>{"apple", "pear", "plum"}));
  EXPECT_EQ(fruits().joined_names(" | "), "apple | pear | plum");
  EXPECT_EQ(fruits().kind(), "fruit");
}

TEST(RegistryDeathTest, ANameRegisteredTwiceAborts) {
  EXPECT_DEATH(Registry<int>("thing", {{"a", "", 1}, {"b", "", 2, {"a"}}}), "thing 'a' is registered twice");
}

}  // namespace
}  // namespace toposched
