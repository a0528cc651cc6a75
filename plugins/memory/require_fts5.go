//go:build !sqlite_fts5

package memory

// The memory plugin searches with SQLite's FTS5, which mattn/go-sqlite3
// compiles in only with the sqlite_fts5 build tag. Without it every search
// would fail at run time, so the build fails here instead, naming the fix:
// build through make, or pass -tags sqlite_fts5 (with CGO_ENABLED=1).
var _ = build_with_tags_sqlite_fts5_and_cgo_see_Makefile
