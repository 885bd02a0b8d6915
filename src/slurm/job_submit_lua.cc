#include "slurm/job_submit_lua.h"

#include <algorithm>
#include <string_view>

#include <fmt/format.h>

namespace toposched::slurm {

namespace {

// The script's body. @URL@, @TIMEOUT@, @CURL@, @TOKEN_FILE@ and @POLICY@ are replaced by
// values checked to need no escaping inside a Lua double-quoted string.
constexpr const char* kScript = R"lua(-- job_submit.lua written by `toposched slurm job-submit-lua` (see docs/slurm.md).
--
-- Jobs whose --comment carries "toposched:KEY=VALUE,..." are placed by `toposched serve`:
--   sbatch -N 2 --gpus-per-node=8 --comment=toposched:tp=8,pp=2 train.sbatch
-- Keys: tp, pp, dp, ep (parallel degrees), policy (placement policy), gpus (GPU count) and
-- nodes (whole nodes), the last two overriding the size read from the job. The service's
-- answer becomes the job's req_nodes; its job id goes to admin_comment as
-- "toposched-job=ID" (serve --slurm releases it when the job ends). If the service cannot be
-- reached within TIMEOUT_S seconds, or refuses, the job passes unchanged and slurm.log_info
-- says why: this plugin never blocks a submission. Other comments are left as they are.

local URL = "@URL@"
local TIMEOUT_S = @TIMEOUT@
local CURL = "@CURL@"
local TOKEN_FILE = "@TOKEN_FILE@"
local DEFAULT_POLICY = "@POLICY@"

local INT_KEYS = { tp = true, pp = true, dp = true, ep = true, gpus = true, nodes = true }

local function is_set(v)
  return v ~= nil and v ~= slurm.NO_VAL and v ~= slurm.NO_VAL16 and v ~= slurm.NO_VAL64 and v ~= 0
end

-- "toposched:tp=8,pp=4" anywhere in the comment -> { tp = 8, pp = 4 }, or nil, why.
local function parse_request(comment)
  if comment == nil then return nil end
  local spec = string.match(comment, "toposched:([%w_=,%.%-]+)")
  if spec == nil then return nil end
  local req = {}
  for item in string.gmatch(spec, "[^,]+") do
    local key, value = string.match(item, "^([%a_]+)=([%w_%.%-]+)$")
    if key == nil then return nil, "cannot read '" .. item .. "' (expected KEY=VALUE)" end
    if key == "policy" then
      req.policy = value
    elseif INT_KEYS[key] then
      local n = tonumber(value)
      if n == nil or n < 1 or n % 1 ~= 0 then return nil, key .. "=" .. value .. " is not a positive integer" end
      req[key] = n
    else
      return nil, "unknown key '" .. key .. "' (known: tp, pp, dp, ep, policy, gpus, nodes)"
    end
  end
  return req
end

-- GPU count of a TRES string such as "gres:gpu:4", "gres:gpu:h100:8" or "gres/gpu=2".
local function gpu_count(tres)
  if tres == nil then return nil end
  for item in string.gmatch(tres, "[^,]+") do
    if string.match(item, "^gres[:/]gpu") then
      return tonumber(string.match(item, "[:=](%d+)$") or "1")
    end
  end
  return nil
end

-- The job's size as the service's request keys: { gpus = N } or { nodes = N }.
local function job_size(job_desc, req)
  if req.nodes then return { nodes = req.nodes } end
  if req.gpus then return { gpus = req.gpus } end
  local nodes = is_set(job_desc.min_nodes) and job_desc.min_nodes or 1
  local per_job = gpu_count(job_desc.tres_per_job)
  if per_job then return { gpus = per_job } end
  local per_node = gpu_count(job_desc.tres_per_node)
  if per_node then return { gpus = per_node * nodes } end
  local per_task = gpu_count(job_desc.tres_per_task)
  if per_task and is_set(job_desc.num_tasks) then return { gpus = per_task * job_desc.num_tasks } end
  if job_desc.shared == 0 and is_set(job_desc.min_nodes) then return { nodes = nodes } end
  return nil
end

local function json_body(id, size, req)
  local parts = { string.format('"job":"%s"', id) }
  for _, key in ipairs({ "gpus", "nodes" }) do
    if size[key] then table.insert(parts, string.format('"%s":%d', key, size[key])) end
  end
  for _, key in ipairs({ "tp", "pp", "dp", "ep" }) do
    if req[key] then table.insert(parts, string.format('"%s":%d', key, req[key])) end
  end
  local policy = req.policy or DEFAULT_POLICY
  if policy ~= "" then table.insert(parts, string.format('"policy":"%s"', policy)) end
  return "{" .. table.concat(parts, ",") .. "}"
end

local function shell_quote(s)
  return "'" .. string.gsub(s, "'", "'\\''") .. "'"
end

-- POSTs the body; returns the HTTP status (a number, nil when no answer) and the body.
local function post_job(body)
  local body_file = os.tmpname()
  local f = io.open(body_file, "w")
  if f == nil then return nil, "cannot write a temporary file" end
  f:write(body)
  f:close()
  local cmd = CURL .. " -sS --max-time " .. TIMEOUT_S .. " -X POST -H 'Content-Type: application/json'"
  if TOKEN_FILE ~= "" then
    local t = io.open(TOKEN_FILE)
    if t == nil then
      os.remove(body_file)
      return nil, "cannot read the token file " .. TOKEN_FILE
    end
    local token = string.gsub(t:read("*a") or "", "%s+$", "")
    t:close()
    cmd = cmd .. " -H " .. shell_quote("Authorization: Bearer " .. token)
  end
  cmd = cmd .. " --data-binary @" .. shell_quote(body_file) .. " -w '\\n%{http_code}' " ..
        shell_quote(URL .. "/v1/jobs") .. " 2>&1"
  local p = io.popen(cmd)
  local out = p and p:read("*a") or ""
  if p then p:close() end
  os.remove(body_file)
  local text, code = string.match(out, "^(.*)\n(%d%d%d)$")
  if code == nil or code == "000" then
    return nil, string.gsub(text or out, "%s+$", "")
  end
  return tonumber(code), text
end

local function job_label(job_desc)
  return (job_desc.name or "?") .. " of uid " .. tostring(job_desc.user_id)
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local req, why = parse_request(job_desc.comment)
  if req == nil then
    if why then slurm.log_info("toposched: job %s passes unchanged: comment: %s", job_label(job_desc), why) end
    return slurm.SUCCESS
  end
  local size = job_size(job_desc, req)
  if size == nil then
    slurm.log_info("toposched: job %s passes unchanged: it asks for no GPUs (add gpus=N to the comment)",
                   job_label(job_desc))
    return slurm.SUCCESS
  end
  local id = string.format("slurm-%d-%d-%04d", os.time(), submit_uid, math.random(0, 9999))
  local status, answer = post_job(json_body(id, size, req))
  if status == nil then
    slurm.log_info("toposched: job %s passes unchanged: %s unreachable: %s", job_label(job_desc), URL, answer or "")
    return slurm.SUCCESS
  end
  if status ~= 201 then
    slurm.log_info("toposched: job %s passes unchanged: the service answered %d: %s", job_label(job_desc), status,
                   answer or "")
    return slurm.SUCCESS
  end
  local nodes = string.match(answer, '"nodes"%s*:%s*"([^"]+)"')
  local count = tonumber(string.match(answer, '"node_count"%s*:%s*(%d+)'))
  if nodes == nil then
    slurm.log_info("toposched: job %s passes unchanged: no \"nodes\" in the answer %s", job_label(job_desc), answer)
    return slurm.SUCCESS
  end
  job_desc.req_nodes = nodes
  if count then
    job_desc.min_nodes = count
    job_desc.max_nodes = count
  end
  job_desc.admin_comment = "toposched-job=" .. id
  slurm.log_info("toposched: job %s placed by %s on %s (toposched job %s)", job_label(job_desc), URL, nodes, id)
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end

math.randomseed(os.time())
return slurm.SUCCESS
)lua";

std::string replace_all(std::string text, const std::string& key, const std::string& value) {
  for (std::size_t at; (at = text.find(key)) != std::string::npos;) text.replace(at, key.size(), value);
  return text;
}

// Values inside "..." in Lua and single-quoted by the shell stay inert with these characters.
bool only_chars(std::string_view v, std::string_view punctuation) {
  return std::all_of(v.begin(), v.end(), [&](unsigned char c) {
    return std::isalnum(c) || punctuation.find(static_cast<char>(c)) != std::string_view::npos;
  });
}

bool safe_value(const std::string& v) { return only_chars(v, "_.:/@%+-[]"); }

// http(s)://HOST[:PORT][/PREFIX] with nothing a Lua string or a shell word would interpret.
bool valid_url(std::string_view url) {
  std::size_t scheme = url.rfind("http://", 0) == 0 ? 7 : url.rfind("https://", 0) == 0 ? 8 : 0;
  if (scheme == 0) return false;
  std::string_view rest = url.substr(scheme);
  std::string_view host = rest.substr(0, rest.find('/'));
  return !host.empty() && host.front() != ':' && only_chars(host, ".-[]:") && only_chars(rest, ".-[]:/_~");
}

}  // namespace

Result<std::string> job_submit_lua(const JobSubmitLuaOptions& o) {
  if (!valid_url(o.url))
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("--url must be http(s)://HOST[:PORT][/PREFIX], found '{}'", o.url));
  if (!(o.timeout_s > 0 && o.timeout_s <= 60))
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("--timeout must be between 0 and 60 seconds (a submission waits for it), found {}",
                                  o.timeout_s));
  for (const auto& [name, value] : {std::pair{"--curl", o.curl}, {"--token-file", o.token_file},
                                    {"--policy", o.default_policy}})
    if (!safe_value(value))
      return make_error(ErrorCode::kInvalidArgument,
                        fmt::format("{} '{}': only letters, digits and ._:/@%+-[] are allowed", name, value));
  std::string url = o.url;
  while (!url.empty() && url.back() == '/') url.pop_back();
  std::string script = kScript;
  script = replace_all(script, "@URL@", url);
  script = replace_all(script, "@TIMEOUT@", fmt::format("{:g}", o.timeout_s));
  script = replace_all(script, "@CURL@", o.curl);
  script = replace_all(script, "@TOKEN_FILE@", o.token_file);
  script = replace_all(script, "@POLICY@", o.default_policy);
  return script;
}

}  // namespace toposched::slurm
