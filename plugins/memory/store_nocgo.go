//go:build !cgo

package memory

// cgoEnabled reports whether this binary was built with cgo, without which
// mattn/go-sqlite3 is a stub that fails every open.
const cgoEnabled = false

// writerDriver is the driver of the writer pool; without cgo Open fails
// before using it.
const writerDriver = "sqlite3"
