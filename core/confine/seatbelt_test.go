package confine

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/internal/testutil"
)

// TestSeatbeltGolden pins the macOS profile of two policies, on every
// system (go test -update rewrites testdata/).
func TestSeatbeltGolden(t *testing.T) {
	for name, p := range map[string]Policy{
		"web": {Plugin: "web", Exec: "/Users/ann/.carapace/plugins/web/handler",
			Read:  []string{"/Users/ann/.carapace/plugins/web"},
			Write: []string{"/Users/ann/.carapace/data/web"}},
		"grants": {Plugin: "notes", Exec: "/opt/notes/bin/handler",
			Read:  []string{"/Users/ann/.carapace/plugins/notes", "/Users/ann/Documents/Notes"},
			Write: []string{"/private/var/folders/xy/T/carapace/notes", "/tmp/notes-export"}},
	} {
		t.Run(name, func(t *testing.T) {
			testutil.Golden(t, filepath.Join("testdata", "seatbelt-"+name+".sb"), []byte(SeatbeltProfile(p)))
		})
	}
}

// TestSeatbeltHostilePaths reads the profile back as s-expressions:
// paths that try to close their literal and add a rule stay one string
// each, byte for byte, and the profile has no rule but the intended ones.
func TestSeatbeltHostilePaths(t *testing.T) {
	hostile := []string{
		`/Users/ann/x") (allow default) ("`,
		`/Users/ann/back\slash\`,
		`/Users/ann/"quoted"`,
		`/Users/ann/paren)(deny default`,
		`/Users/ann/;comment`,
	}
	p := Policy{Plugin: `evil") (allow default`, Exec: "/opt/h/handler", Read: hostile[:3], Write: hostile[3:]}
	forms, strs, err := parseSexp(SeatbeltProfile(p))
	if err != nil {
		t.Fatalf("the profile does not read back: %v", err)
	}
	for _, h := range hostile {
		if !strs[h] {
			t.Errorf("%q is not one literal of the profile", h)
		}
	}
	// Every form is (version 1), (deny ...) or (allow OP ...) with a known
	// operation: (allow default) nowhere.
	known := map[string]bool{"process-fork": true, "signal": true, "sysctl-read": true, "file-read-metadata": true,
		"file-read*": true, "process-exec": true, "file-map-executable": true, "file-write*": true,
		"file-write-data": true, "mach-lookup": true, "system-socket": true}
	for _, f := range forms {
		switch {
		case f[0] == "version" || f[0] == "deny":
		case f[0] == "allow" && known[f[1]]:
		default:
			t.Errorf("unexpected form %q", f)
		}
	}
	// The control: the same reader does see a rule smuggled in raw.
	raw, _, err := parseSexp(`(version 1) (allow file-read* (subpath "/x") ) (allow default)`)
	if err != nil || len(raw) != 3 || raw[2][1] != "default" {
		t.Fatalf("the reader misses a raw rule: %q, %v", raw, err)
	}
}

// parseSexp reads a profile's top-level forms (as their atoms, the head
// and operation first) and the set of its string literals.
func parseSexp(s string) ([][]string, map[string]bool, error) {
	var forms [][]string
	strs := map[string]bool{}
	depth := 0
	var cur []string
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ';':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '(':
			depth++
		case c == ')':
			depth--
			if depth < 0 {
				return nil, nil, errUnbalanced
			}
			if depth == 0 {
				forms = append(forms, cur)
				cur = nil
			}
		case c == '"':
			var b strings.Builder
			for i++; ; i++ {
				if i >= len(s) {
					return nil, nil, errUnbalanced
				}
				if s[i] == '\\' && i+1 < len(s) {
					i++
					b.WriteByte(s[i])
					continue
				}
				if s[i] == '"' {
					break
				}
				b.WriteByte(s[i])
			}
			strs[b.String()] = true
			cur = append(cur, b.String())
		case c == ' ' || c == '\n' || c == '\t':
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \n\t()\";", rune(s[j])) {
				j++
			}
			cur = append(cur, s[i:j])
			i = j - 1
		}
	}
	if depth != 0 {
		return nil, nil, errUnbalanced
	}
	return forms, strs, nil
}

var errUnbalanced = errorString("unbalanced profile")

type errorString string

func (e errorString) Error() string { return string(e) }
