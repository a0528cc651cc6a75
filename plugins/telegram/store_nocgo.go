//go:build !cgo

package telegram

// cgoEnabled reports whether this binary was built with cgo, without which
// mattn/go-sqlite3 is a stub that fails every open: the handler must be
// built with CGO_ENABLED=1.
const cgoEnabled = false
