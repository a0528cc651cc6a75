//go:build !linux && !darwin

package loginitem

// New returns an Item that reports ErrUnsupported: this platform has no
// login items this package knows. The signature is every platform's (see
// Options).
func New(opts Options) Item { return unsupported{} }

// unsupported is the Item of a platform without login items.
type unsupported struct{}

var _ Item = unsupported{}

// Enabled implements Item.
func (unsupported) Enabled() (bool, error) { return false, ErrUnsupported }

// SetEnabled implements Item.
func (unsupported) SetEnabled(bool) error { return ErrUnsupported }
