//go:build cgo

package memory

// cgoEnabled reports whether this binary was built with cgo, without which
// mattn/go-sqlite3 is a stub that fails every open.
const cgoEnabled = true
