//go:build !darwin || !cgo

package calaccess

// New returns nil: without macOS (and cgo, which EventKit is reached
// through) there is no calendar access to ask for, and the menu shows no
// item.
func New() Access { return nil }
