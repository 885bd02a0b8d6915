// SqliteStore: the default Store, one SQLite database file (WAL journal,
// synchronous=FULL, so a commit that returned is on stable storage and survives a crash or
// a kill -9 of the server).
//
// Schema (version 1):
//   meta(key PRIMARY KEY, value)      cluster_name, cluster_digest, schema_version
//   jobs(seq INTEGER PRIMARY KEY, id UNIQUE, gpus, request_json, placement_json, created_unix_ms)
//        gpus = JSON array of "node:index" in rank order; seq = commit order
//   events(seq INTEGER PRIMARY KEY AUTOINCREMENT, kind, job_id, body_json, unix_ms)
//        every event, or the newest event_log_limit() when one is set
// One commit() = one BEGIN IMMEDIATE ... COMMIT transaction.
//
// Thread-safety: all methods lock an internal mutex, so a SqliteStore may be shared by
// threads; the server still calls commit() from its one writer.
#pragma once

#include <memory>
#include <string>

#include "service/store.h"

namespace toposched::service {

// Opens (creating when missing) the database at `path` and takes an exclusive flock on
// "PATH.lock" for as long as the store lives: kUnavailable "the store is in use by another
// process" when another process (or another open store in this one) holds it; kIo naming
// the path on other failures.
Result<std::unique_ptr<Store>> open_sqlite_store(const std::string& path);

}  // namespace toposched::service
