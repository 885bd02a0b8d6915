// The generated job_submit.lua: values land in the script, unsafe values are refused. (The
// script's behaviour inside slurmctld is tested end to end in
// tests/e2e/test_slurm_job_submit.py.)
#include <gtest/gtest.h>

#include "slurm/job_submit_lua.h"

namespace toposched::slurm {
namespace {

TEST(JobSubmitLua, FillsTheSettings) {
  JobSubmitLuaOptions o;
  o.url = "http://10.0.0.5:7070/";
  o.timeout_s = 1.5;
  o.token_file = "/etc/toposched/token";
  auto lua = job_submit_lua(o);
  ASSERT_TRUE(lua) << lua.error().message;
  EXPECT_NE(lua->find("local URL = \"http://10.0.0.5:7070\"\n"), std::string::npos);
  EXPECT_NE(lua->find("local TIMEOUT_S = 1.5\n"), std::string::npos);
  EXPECT_NE(lua->find("local TOKEN_FILE = \"/etc/toposched/token\"\n"), std::string::npos);
  EXPECT_NE(lua->find("function slurm_job_submit(job_desc, part_list, submit_uid)"), std::string::npos);
  EXPECT_NE(lua->find("function slurm_job_modify("), std::string::npos);
  for (const char* placeholder : {"@URL@", "@TIMEOUT@", "@CURL@", "@TOKEN_FILE@", "@POLICY@"})
    EXPECT_EQ(lua->find(placeholder), std::string::npos) << placeholder;
}

TEST(JobSubmitLua, RefusesWhatCouldEscapeTheScript) {
  for (const char* url : {"", "127.0.0.1:7070", "ftp://h", "http://", "http://h\"; os.exit()", "http://h/ x",
                          "http://h/$(reboot)", "http://:80"}) {
    JobSubmitLuaOptions o;
    o.url = url;
    auto r = job_submit_lua(o);
    EXPECT_FALSE(r) << url;
    if (!r) {
      EXPECT_EQ(r.error().code, ErrorCode::kInvalidArgument);
    }
  }
  JobSubmitLuaOptions o;
  o.url = "https://[::1]:7070";
  EXPECT_TRUE(job_submit_lua(o));
  o.curl = "/usr/bin/curl; rm -rf /";
  EXPECT_FALSE(job_submit_lua(o));
  o.curl = "curl";
  o.timeout_s = 0;
  EXPECT_FALSE(job_submit_lua(o));
}

}  // namespace
}  // namespace toposched::slurm
