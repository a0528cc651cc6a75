package confine

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// Access is what a Rule lets the handler do under its path.
type Access string

// The accesses a Rule grants. On Linux each maps to Landlock rights (a
// file gets the file rights of its access, a directory all of them); on
// macOS to Seatbelt operations.
const (
	// AccessRead reads files and lists directories.
	AccessRead Access = "read"
	// AccessReadExec reads and executes files and lists directories.
	AccessReadExec Access = "read+exec"
	// AccessReadWrite reads and writes (and truncates) existing files;
	// it creates and removes nothing. For devices such as /dev/null.
	AccessReadWrite Access = "read+write"
	// AccessAll is everything the system can restrict: read, write,
	// execute, create and remove files, directories, links, pipes and
	// sockets, rename between directories. Not connect(2) to a Unix
	// socket there, which the handler never can.
	AccessAll Access = "all"
)

// Rule is one path of the effective policy and why it is there, as
// `carapace plugin show` prints it.
type Rule struct {
	Path   string
	Access Access
	Why    string
}

// linuxSystem is the system set every confined handler may use on Linux,
// beside its own trees: what a program, its dynamic loader and its
// libraries read to start, verify TLS certificates, tell the time and
// look up names. Not the whole /etc (secrets live there), not /home,
// /root, /tmp, /run or /var, not /proc beyond the handler's own entry, not
// /sys. Paths missing on the machine are skipped.
var linuxSystem = []Rule{
	{"/usr", AccessReadExec, "programs, shared libraries and their data"},
	{"/lib", AccessReadExec, "shared libraries and the dynamic loader"},
	{"/lib64", AccessReadExec, "shared libraries and the dynamic loader"},
	{"/lib32", AccessReadExec, "32-bit shared libraries"},
	{"/bin", AccessReadExec, "programs"},
	{"/sbin", AccessReadExec, "programs"},
	{"/etc/ssl", AccessRead, "TLS root certificates"},
	{"/etc/ca-certificates", AccessRead, "TLS root certificates"},
	{"/etc/pki", AccessRead, "TLS root certificates"},
	{"/etc/ld.so.cache", AccessRead, "the dynamic loader's library cache"},
	{"/etc/ld.so.conf", AccessRead, "the dynamic loader's configuration"},
	{"/etc/ld.so.conf.d", AccessRead, "the dynamic loader's configuration"},
	{"/etc/localtime", AccessRead, "the local time zone"},
	{"/usr/share/zoneinfo", AccessRead, "time zones"},
	{"/etc/nsswitch.conf", AccessRead, "how names are looked up"},
	{"/etc/passwd", AccessRead, "user names (no passwords: those are in /etc/shadow)"},
	{"/etc/group", AccessRead, "group names"},
	{"/etc/hosts", AccessRead, "static host names"},
	{"/etc/mime.types", AccessRead, "file types by extension"},
	{"/proc/self", AccessRead, "the handler's own /proc entry: the launcher's, resolved to its pid, which exec keeps"},
	{"/dev/null", AccessReadWrite, "the null device"},
	{"/dev/zero", AccessRead, "zeros"},
	{"/dev/random", AccessRead, "randomness"},
	{"/dev/urandom", AccessRead, "randomness"},
}

// darwinSystem is the system set on macOS, for the Seatbelt profile:
// what dyld, libSystem and the Go runtime read to start a program, plus
// TLS certificates and time zones. /private/etc and /private/var are
// where /etc and /var point.
var darwinSystem = []Rule{
	{"/usr/lib", AccessReadExec, "libSystem and the other system libraries"},
	{"/System/Library", AccessReadExec, "system frameworks and the dyld shared cache"},
	{"/System/Volumes/Preboot/Cryptexes/OS", AccessReadExec, "the dyld shared cache on macOS 13 and later"},
	{"/Library/Apple/System/Library", AccessReadExec, "Apple's system additions (Rosetta among them)"},
	{"/private/etc/ssl", AccessRead, "TLS root certificates"},
	{"/usr/share/zoneinfo", AccessRead, "time zones"},
	{"/private/var/db/timezone", AccessRead, "time zones (/etc/localtime points here)"},
	{"/private/etc/localtime", AccessRead, "the local time zone"},
	{"/private/etc/hosts", AccessRead, "static host names"},
	{"/private/etc/passwd", AccessRead, "user names"},
	{"/private/etc/group", AccessRead, "group names"},
	{"/dev/null", AccessReadWrite, "the null device"},
	{"/dev/zero", AccessRead, "zeros"},
	{"/dev/random", AccessRead, "randomness"},
	{"/dev/urandom", AccessRead, "randomness"},
}

// SystemRules returns the system set of goos ("linux", "darwin"): the
// paths every confined handler may use beside its own trees, whether or
// not they exist on this machine. Other systems have none.
func SystemRules(goos string) []Rule {
	switch goos {
	case "linux":
		return append([]Rule(nil), linuxSystem...)
	case "darwin":
		return append([]Rule(nil), darwinSystem...)
	}
	return nil
}

// Rules returns the effective policy on this system: the handler's own
// trees, the handler itself, then the system set, each path that exists
// on this machine once. It is what the launcher enforces (on macOS,
// SeatbeltProfile), so it is what `carapace plugin show` should print.
func (p Policy) Rules() []Rule {
	return p.rules(runtime.GOOS, exists)
}

// rules is Rules for goos, with present deciding which paths are there.
func (p Policy) rules(goos string, present func(string) bool) []Rule {
	var out []Rule
	seen := map[string]bool{}
	add := func(r Rule) {
		if seen[r.Path] || !present(r.Path) {
			return
		}
		seen[r.Path] = true
		out = append(out, r)
	}
	for _, w := range p.Write {
		add(Rule{w, AccessAll, "the plugin's data (write)"})
	}
	for _, r := range p.Read {
		add(Rule{r, AccessReadExec, "the plugin's files (read)"})
	}
	if p.Exec != "" && !beneath(p.Exec, p.Read) && !beneath(p.Exec, p.Write) {
		add(Rule{p.Exec, AccessReadExec, "the handler"})
	}
	for _, r := range SystemRules(goos) {
		add(r)
	}
	return out
}

// beneath reports whether path is one of trees or inside one.
func beneath(path string, trees []string) bool {
	for _, t := range trees {
		if path == t || strings.HasPrefix(path, strings.TrimSuffix(t, "/")+"/") {
			return true
		}
	}
	return false
}

// exists reports whether path names something (symbolic links followed,
// as Landlock and Seatbelt resolve them).
func exists(path string) bool {
	_, err := os.Stat(filepath.Clean(path))
	return err == nil
}
