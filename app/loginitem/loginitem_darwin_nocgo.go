//go:build darwin && !cgo

package loginitem

import "fmt"

// New returns an Item whose methods fail with ErrUnsupported: SMAppService
// is bound with cgo, and this build has none.
func New(opts Options) Item { return nocgo{} }

// nocgo is the login item of a build without cgo.
type nocgo struct{}

var errNoCgo = fmt.Errorf("%w: this build of Carapace has no cgo, which login items on macOS need", ErrUnsupported)

// Enabled implements Item.
func (nocgo) Enabled() (bool, error) { return false, errNoCgo }

// SetEnabled implements Item.
func (nocgo) SetEnabled(bool) error { return errNoCgo }
