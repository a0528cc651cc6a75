package loginitem

// Options configures New. The same type serves every platform; a field a
// platform cannot honour is documented as such there.
//
// Every platform's New has the same signature:
//
//	func New(opts Options) Item
//
// New does no I/O: Enabled and SetEnabled report what goes wrong.
type Options struct {
	// Executable is the absolute path of the app binary to start at
	// login; "" means the running program's (os.Executable). On macOS
	// the login item is the running bundle itself and this is ignored.
	Executable string
	// Home is the Carapace home to start the app with (its --home flag);
	// "" starts it with the default home.
	Home string
}
