#include "service/sqlite_store.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sqlite3.h>

#include "formats/json_input.h"
#include "topology/mutex.h"

namespace toposched::service {

namespace {
constexpr const char* kSchema =
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE TABLE IF NOT EXISTS jobs(seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE,"
    " gpus TEXT NOT NULL, request_json TEXT NOT NULL, placement_json TEXT NOT NULL,"
    " created_unix_ms INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS events(seq INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL,"
    " job_id TEXT NOT NULL, body_json TEXT NOT NULL, unix_ms INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS node_marks(node TEXT NOT NULL, source TEXT NOT NULL, reason TEXT NOT NULL,"
    " since_unix_ms INTEGER NOT NULL, PRIMARY KEY(node, source));";

std::int64_t now_unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A prepared statement, finalised on destruction.
class Statement {
 public:
  Statement() = default;
  Statement(sqlite3* db, const char* sql) { sqlite3_prepare_v3(db, sql, -1, SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr); }
  Statement(Statement&& o) noexcept : stmt_(o.stmt_) { o.stmt_ = nullptr; }
  Statement& operator=(Statement&& o) noexcept {
    std::swap(stmt_, o.stmt_);
    return *this;
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  sqlite3_stmt* get() const { return stmt_; }
  explicit operator bool() const { return stmt_ != nullptr; }
  void bind(int i, std::string_view text) { sqlite3_bind_text(stmt_, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT); }
  void bind(int i, std::int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  int step() { return sqlite3_step(stmt_); }
  void reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  std::string text(int col) const {
    auto* p = sqlite3_column_text(stmt_, col);
    return p ? std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))) : std::string();
  }
  std::int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// One owner per store, as LevelDB's FileLock: an exclusive flock(2) on "PATH.lock" beside
// the database, held while the store is open (the kernel drops it when the process dies,
// kill -9 included). SQLite's own locks only serialise transactions: two servers on one
// file both started and handed out the same GPUs.
class OwnerLock {
 public:
  static Result<OwnerLock> take(const std::string& db_path) {
    const std::string path = db_path + ".lock";
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
      return make_error(ErrorCode::kIo, fmt::format("{}: cannot open the store's lock file: {}", path, std::strerror(errno)));
    int rc;
    while ((rc = ::flock(fd, LOCK_EX | LOCK_NB)) != 0 && errno == EINTR) {
    }
    if (rc != 0) {
      const int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK)
        return make_error(ErrorCode::kUnavailable,
                          fmt::format("{}: the store is in use by another process (a running `toposched serve` or "
                                      "`state import` holds {}); stop it first",
                                      db_path, path));
      return make_error(ErrorCode::kIo, fmt::format("{}: cannot lock: {}", path, std::strerror(err)));
    }
    return OwnerLock(fd);
  }
  OwnerLock() = default;
  OwnerLock(OwnerLock&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  OwnerLock& operator=(OwnerLock&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~OwnerLock() {
    if (fd_ >= 0) ::close(fd_);  // closing the descriptor releases the flock
  }

 private:
  explicit OwnerLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

class SqliteStore final : public Store {
 public:
  SqliteStore(sqlite3* db, std::string path, OwnerLock lock) : lock_(std::move(lock)), db_(db), path_(std::move(path)) {}
  ~SqliteStore() override { close(); }

  Result<void> init() EXCLUDES(mutex_);
  std::string_view kind() const override { return "sqlite"; }
  Result<void> bind_cluster(const Cluster& cluster) override;
  Result<std::vector<JobRecord>> load_jobs() override;
  Result<std::vector<NodeMarkRecord>> load_node_marks() override;
  Result<void> commit(std::span<const Mutation> batch) override;
  Result<std::vector<StoreEvent>> events(std::int64_t after_seq, std::size_t limit) override;

 private:
  void close() EXCLUDES(mutex_) {
    MutexLock lock(mutex_);
    insert_job_ = {};
    delete_job_ = {};
    insert_event_ = {};
    trim_events_ = {};
    put_mark_ = {};
    delete_mark_ = {};
    if (db_) sqlite3_close(db_);
    db_ = nullptr;
  }
  Error sql_error(std::string_view what) const REQUIRES(mutex_) {
    return Error{ErrorCode::kIo, fmt::format("{}: {}: {}", path_, what, sqlite3_errmsg(db_)), {}};
  }
  Result<void> exec(const char* sql) REQUIRES(mutex_) {
    char* msg = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &msg) != SQLITE_OK) {
      std::string m = msg ? msg : "unknown error";
      sqlite3_free(msg);
      return make_error(ErrorCode::kIo, fmt::format("{}: {}", path_, m));
    }
    return {};
  }
  Result<std::optional<std::string>> meta(std::string_view key) REQUIRES(mutex_);
  Result<void> bind_digest(std::string_view cluster_name, std::string_view spec_digest) REQUIRES(mutex_);
  Result<void> apply(const Mutation& m, std::int64_t now) REQUIRES(mutex_);
  Result<void> apply_job(const Mutation& m, std::int64_t now) REQUIRES(mutex_);
  Result<void> apply_node_mark(const NodeMarkRecord& mark, bool set) REQUIRES(mutex_);
  Result<void> append_event(std::string_view kind, std::string_view subject, std::string_view body, std::int64_t now)
      REQUIRES(mutex_);

  Mutex mutex_;
  OwnerLock lock_;  // first: released after the database is closed
  sqlite3* db_ GUARDED_BY(mutex_);
  std::string path_;
  Statement insert_job_ GUARDED_BY(mutex_);
  Statement delete_job_ GUARDED_BY(mutex_);
  Statement insert_event_ GUARDED_BY(mutex_);
  Statement trim_events_ GUARDED_BY(mutex_);
  Statement put_mark_ GUARDED_BY(mutex_);
  Statement delete_mark_ GUARDED_BY(mutex_);
};

Result<void> SqliteStore::init() {
  MutexLock lock(mutex_);  // uncontended (the store is not shared yet); every access to db_ holds it
  sqlite3_busy_timeout(db_, 5000);
  TOPOSCHED_CHECK(exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=FULL;"));
  TOPOSCHED_CHECK(exec(kSchema));
  insert_job_ = Statement(db_,
                          "INSERT INTO jobs(id, gpus, request_json, placement_json, created_unix_ms) "
                          "VALUES(?1, ?2, ?3, ?4, ?5)");
  delete_job_ = Statement(db_, "DELETE FROM jobs WHERE id = ?1");
  insert_event_ = Statement(db_, "INSERT INTO events(kind, job_id, body_json, unix_ms) VALUES(?1, ?2, ?3, ?4)");
  trim_events_ = Statement(db_, "DELETE FROM events WHERE seq <= ?1");
  put_mark_ = Statement(db_, "INSERT OR REPLACE INTO node_marks(node, source, reason, since_unix_ms) VALUES(?1, ?2, ?3, ?4)");
  delete_mark_ = Statement(db_, "DELETE FROM node_marks WHERE node = ?1 AND source = ?2");
  if (!insert_job_ || !delete_job_ || !insert_event_ || !trim_events_ || !put_mark_ || !delete_mark_)
    return tl::unexpected(sql_error("cannot prepare statements"));
  return {};
}

Result<std::optional<std::string>> SqliteStore::meta(std::string_view key) {
  Statement q(db_, "SELECT value FROM meta WHERE key = ?1");
  if (!q) return tl::unexpected(sql_error("cannot read meta"));
  q.bind(1, key);
  int rc = q.step();
  if (rc == SQLITE_ROW) return std::optional<std::string>(q.text(0));
  if (rc == SQLITE_DONE) return std::optional<std::string>();
  return tl::unexpected(sql_error("cannot read meta"));
}

Result<void> SqliteStore::bind_cluster(const Cluster& cluster) {
  MutexLock lock(mutex_);
  TOPOSCHED_CHECK(bind_digest(cluster.name(), cluster_digest(cluster)));
  cluster_ = &cluster;
  return {};
}

Result<void> SqliteStore::bind_digest(std::string_view cluster_name, std::string_view spec_digest) {
  TOPOSCHED_TRY(digest, meta("cluster_digest"));
  if (digest) {
    if (*digest == spec_digest) return {};
    TOPOSCHED_TRY(name, meta("cluster_name"));
    return make_error(ErrorCode::kValidation,
                      fmt::format("{}: the store belongs to cluster '{}' (spec digest {}), not to cluster '{}' "
                                  "(digest {}); start with that cluster or use another --store",
                                  path_, name.value_or("?"), *digest, cluster_name, spec_digest));
  }
  Statement put(db_, "INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)");
  if (!put) return tl::unexpected(sql_error("cannot write meta"));
  TOPOSCHED_CHECK(exec("BEGIN IMMEDIATE"));
  for (auto [k, v] : {std::pair<std::string_view, std::string_view>{"cluster_name", cluster_name},
                      {"cluster_digest", spec_digest},
                      {"schema_version", "1"}}) {
    put.bind(1, k);
    put.bind(2, v);
    if (put.step() != SQLITE_DONE) {
      Error e = sql_error("cannot write meta");
      (void)exec("ROLLBACK");
      return tl::unexpected(e);
    }
    put.reset();
  }
  return exec("COMMIT");
}

Result<std::vector<JobRecord>> SqliteStore::load_jobs() {
  MutexLock lock(mutex_);
  Statement q(db_, "SELECT id, gpus, request_json, placement_json, created_unix_ms FROM jobs ORDER BY seq");
  if (!q) return tl::unexpected(sql_error("cannot read jobs"));
  std::vector<JobRecord> jobs;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) {
    JobRecord r;
    r.id = q.text(0);
    // A row names its place in errors: "PATH (job 'a', column gpus):1:7: ...".
    const std::string source = fmt::format("{} (job '{}', column gpus)", path_, r.id);
    TOPOSCHED_TRY(gpus_doc, parse_json_document(q.text(1), source));
    TOPOSCHED_TRY(gpus, json_string_array(gpus_doc, source));
    r.gpus_by_rank = std::move(gpus);
    r.request_json = q.text(2);
    r.placement_json = q.text(3);
    r.created_unix_ms = q.integer(4);
    jobs.push_back(std::move(r));
  }
  if (rc != SQLITE_DONE) return tl::unexpected(sql_error("cannot read jobs"));
  return jobs;
}

Result<std::vector<NodeMarkRecord>> SqliteStore::load_node_marks() {
  MutexLock lock(mutex_);
  Statement q(db_, "SELECT node, source, reason, since_unix_ms FROM node_marks ORDER BY node, source");
  if (!q) return tl::unexpected(sql_error("cannot read node marks"));
  std::vector<NodeMarkRecord> marks;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW) marks.push_back({q.text(0), q.text(1), q.text(2), q.integer(3)});
  if (rc != SQLITE_DONE) return tl::unexpected(sql_error("cannot read node marks"));
  return marks;
}

Result<void> SqliteStore::apply(const Mutation& m, std::int64_t now) {
  if (m.kind == Mutation::Kind::kMarkNode || m.kind == Mutation::Kind::kUnmarkNode) {
    const NodeMarkRecord mark = node_mark_record(*cluster_, m);
    const bool set = m.kind == Mutation::Kind::kMarkNode;
    TOPOSCHED_CHECK(apply_node_mark(mark, set));
    const std::string body =
        nlohmann::json{{"source", mark.source}, {"reason", mark.reason}, {"since_unix_ms", mark.since_unix_ms}}.dump(
            -1, ' ', false, nlohmann::json::error_handler_t::replace);
    return append_event(set ? "mark-node" : "unmark-node", mark.node, body, now);
  }
  return apply_job(m, now);
}

Result<void> SqliteStore::apply_node_mark(const NodeMarkRecord& mark, bool set) {
  if (set) {
    put_mark_.reset();
    put_mark_.bind(1, mark.node);
    put_mark_.bind(2, mark.source);
    put_mark_.bind(3, mark.reason);
    put_mark_.bind(4, mark.since_unix_ms);
    if (put_mark_.step() != SQLITE_DONE) return tl::unexpected(sql_error("cannot write a node mark"));
    return {};
  }
  delete_mark_.reset();
  delete_mark_.bind(1, mark.node);
  delete_mark_.bind(2, mark.source);
  if (delete_mark_.step() != SQLITE_DONE) return tl::unexpected(sql_error("cannot delete a node mark"));
  return {};
}

Result<void> SqliteStore::append_event(std::string_view kind, std::string_view subject, std::string_view body,
                                       std::int64_t now) {
  insert_event_.reset();
  insert_event_.bind(1, kind);
  insert_event_.bind(2, subject);
  insert_event_.bind(3, body);
  insert_event_.bind(4, now);
  if (insert_event_.step() != SQLITE_DONE) return tl::unexpected(sql_error("cannot append an event"));
  return {};
}

Result<void> SqliteStore::apply_job(const Mutation& m, std::int64_t now) {
  const bool place = m.kind == Mutation::Kind::kPlace;
  if (place) {
    const JobRecord job = job_record(*cluster_, m, now);
    insert_job_.reset();
    insert_job_.bind(1, job.id);
    insert_job_.bind(2, nlohmann::json(job.gpus_by_rank).dump());
    insert_job_.bind(3, job.request_json);
    insert_job_.bind(4, job.placement_json);
    insert_job_.bind(5, job.created_unix_ms);
    int rc = insert_job_.step();
    if (rc == SQLITE_CONSTRAINT)
      return make_error(ErrorCode::kConflict, fmt::format("job '{}' is already in the store", m.job_id));
    if (rc != SQLITE_DONE) return tl::unexpected(sql_error("cannot insert a job"));
  } else {
    delete_job_.reset();
    delete_job_.bind(1, m.job_id);
    if (delete_job_.step() != SQLITE_DONE) return tl::unexpected(sql_error("cannot delete a job"));
    if (sqlite3_changes(db_) == 0)
      return make_error(ErrorCode::kConflict, fmt::format("job '{}' is not in the store", m.job_id));
  }
  return append_event(place ? "place" : "release", m.job_id,
                      place ? std::string_view(m.answer_json) : std::string_view("{}"), now);
}

Result<void> SqliteStore::commit(std::span<const Mutation> batch) {
  MutexLock lock(mutex_);
  TOPOSCHED_CHECK(check_bound());
  if (batch.empty()) return {};
  TOPOSCHED_CHECK(exec("BEGIN IMMEDIATE"));
  std::int64_t now = now_unix_ms();
  for (const Mutation& m : batch) {
    if (auto ok = apply(m, now); !ok) {
      (void)exec("ROLLBACK");
      return ok;
    }
  }
  if (event_log_limit_ > 0) {
    // The events' seq is the rowid (AUTOINCREMENT: never reused), the last one just inserted.
    trim_events_.reset();
    trim_events_.bind(1, static_cast<std::int64_t>(sqlite3_last_insert_rowid(db_)) - event_log_limit_);
    if (trim_events_.step() != SQLITE_DONE) {
      Error e = sql_error("cannot trim the event log");
      (void)exec("ROLLBACK");
      return tl::unexpected(e);
    }
  }
  if (auto ok = exec("COMMIT"); !ok) {
    (void)exec("ROLLBACK");
    return ok;
  }
  return {};
}

Result<std::vector<StoreEvent>> SqliteStore::events(std::int64_t after_seq, std::size_t limit) {
  MutexLock lock(mutex_);
  Statement q(db_, "SELECT seq, kind, job_id, body_json, unix_ms FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2");
  if (!q) return tl::unexpected(sql_error("cannot read events"));
  q.bind(1, after_seq);
  q.bind(2, static_cast<std::int64_t>(limit));
  std::vector<StoreEvent> out;
  int rc;
  while ((rc = q.step()) == SQLITE_ROW)
    out.push_back(StoreEvent{q.integer(0), q.text(1), q.text(2), q.text(3), q.integer(4)});
  if (rc != SQLITE_DONE) return tl::unexpected(sql_error("cannot read events"));
  return out;
}
}  // namespace

Result<std::unique_ptr<Store>> open_sqlite_store(const std::string& path) {
  OwnerLock lock;
  if (path != ":memory:") {
    TOPOSCHED_TRY(taken, OwnerLock::take(path));
    lock = std::move(taken);
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
                           nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return make_error(ErrorCode::kIo, fmt::format("{}: cannot open the store: {}", path, msg));
  }
  auto store = std::make_unique<SqliteStore>(db, path, std::move(lock));
  TOPOSCHED_CHECK(store->init());
  return std::unique_ptr<Store>(std::move(store));
}

}  // namespace toposched::service
