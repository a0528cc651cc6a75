package manifest

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// plugin is the path of a fixture plugin folder.
func plugin(name string) string { return filepath.Join("testdata", "plugins", name) }

// problem is an expected problem of Check: file relative to the plugin
// folder ("" for the folder itself).
type problem struct {
	file, ptr, msg, fix string
	warning             bool
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name   string
		dir    string
		ok     bool // a manifest is returned
		expect []problem
	}{
		{"good plugin: one warning per high-risk tool", plugin("good-plugin"), true, []problem{
			{ManifestFile, "/provides/tools/1/risk_level", `tool "note_delete" is high-risk: calls to note_delete wait for the user's confirmation`, `use "low" for read-only tools`, true},
		}},
		{"the built-in echo plugin", filepath.Join("..", "..", "plugins", "echo"), true, []problem{
			{ManifestFile, "/provides/tools/1/risk_level", "calls to echo_confirm wait for the user's confirmation", "low", true},
		}},
		{"tools without skills", plugin("no-skills"), false, []problem{
			{SkillsDir, "", "no skills folder: the agent would not learn the plugin's tools", "write skills/<plugin>.md", false},
		}},
		{"channel-only plugin without skills", plugin("channel-only"), true, []problem{
			{SkillsDir, "", "the plugin has no skills folder", "write skills/<plugin>.md", true},
		}},
		{"skills folder without .md", plugin("empty-skills"), false, []problem{
			{SkillsDir, "", "holds no .md file: the agent would not learn", "write skills/<plugin>.md", false},
			{"skills/README.txt", "", "is not a .md file; it is ignored", "rename it to .md", true},
		}},
		{"folder name", plugin("Bad_Name"), true, []problem{
			{"", "", `the folder's name is not a valid plugin name: plugin name "Bad_Name" must be kebab-case`, `install the plugin under a valid name: use "bad-name"`, true},
		}},
		{"broken manifest: every stage still runs", plugin("broken"), false, []problem{
			{ManifestFile, "", "line 2, column 14: invalid JSON", "correct the JSON syntax", false},
			{"skills/empty.md", "", "is empty", "teach the agent", true},
			{"skills/notes.txt", "", "is not a .md file", "remove it", true},
		}},
		{"missing folder", plugin("no-such-plugin"), false, []problem{
			{"", "", "cannot be read", "the plugin's folder", false},
		}},
		{"not a folder", plugin("good-plugin/manifest.json"), false, []problem{
			{"", "", "is not a folder", "the plugin's folder", false},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, probs := Check(tt.dir, Options{})
			if (m != nil) != tt.ok {
				t.Errorf("manifest returned = %v, want %v", m != nil, tt.ok)
			}
			assertCheck(t, tt.dir, probs, tt.expect)
		})
	}
}

// assertCheck checks that probs are exactly want, sorted.
func assertCheck(t *testing.T, dir string, probs []Problem, want []problem) {
	t.Helper()
	used := make([]bool, len(probs))
	for _, w := range want {
		file := dir
		if w.file != "" {
			file = filepath.Join(dir, w.file)
		}
		found := false
		for i, p := range probs {
			if !used[i] && p.File == file && p.Pointer == w.ptr && p.Warning == w.warning && strings.Contains(p.Message, w.msg) && strings.Contains(p.Fix, w.fix) {
				used[i], found = true, true
				break
			}
		}
		if !found {
			t.Errorf("missing problem %+v", w)
		}
	}
	for i, p := range probs {
		if !used[i] {
			t.Errorf("unexpected problem: %s", p)
		}
	}
	if !slices.IsSortedFunc(probs, func(a, b Problem) int {
		if c := strings.Compare(a.File, b.File); c != 0 {
			return c
		}
		return comparePointers(a.Pointer, b.Pointer)
	}) {
		t.Errorf("problems not sorted: %v", probs)
	}
}

// copyPlugin copies a fixture plugin into a temporary folder of the same
// name and returns the copy's path.
func copyPlugin(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	err := os.CopyFS(dst, os.DirFS(plugin(name)))
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func TestCheckSymlinks(t *testing.T) {
	outside := filepath.Join(t.TempDir(), "secret.txt")
	if err := os.WriteFile(outside, []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		setup  func(t *testing.T, dir string)
		ok     bool
		expect []problem
		loaded bool // the manifest was read: the high-risk warning follows
	}{
		{"manifest linked outside the folder", func(t *testing.T, dir string) {
			out := filepath.Join(t.TempDir(), "manifest.json")
			mustRename(t, filepath.Join(dir, ManifestFile), out)
			mustSymlink(t, out, filepath.Join(dir, ManifestFile))
		}, false, []problem{{ManifestFile, "", "is a symbolic link to ", "replace the link with a copy", false}}, false},
		{"manifest linked within the folder", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, "src"), 0o755); err != nil {
				t.Fatal(err)
			}
			mustRename(t, filepath.Join(dir, ManifestFile), filepath.Join(dir, "src", ManifestFile))
			mustSymlink(t, filepath.Join("src", ManifestFile), filepath.Join(dir, ManifestFile))
		}, true, nil, true},
		{"manifest linked through .. back out", func(t *testing.T, dir string) {
			out := filepath.Join(filepath.Dir(dir), "elsewhere.json")
			mustRename(t, filepath.Join(dir, ManifestFile), out)
			mustSymlink(t, filepath.Join("..", "elsewhere.json"), filepath.Join(dir, ManifestFile))
		}, false, []problem{{ManifestFile, "", "outside the plugin's folder", "replace the link", false}}, false},
		{"dangling manifest link", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, ManifestFile)))
			mustSymlink(t, "/nonexistent/manifest.json", filepath.Join(dir, ManifestFile))
		}, false, []problem{{ManifestFile, "", "symbolic link that cannot be followed", "replace the link", false}}, false},
		{"skill file linked to a secret", func(t *testing.T, dir string) {
			mustSymlink(t, outside, filepath.Join(dir, SkillsDir, "leak.md"))
		}, false, []problem{{"skills/leak.md", "", "is a symbolic link", "could carry any file", false}}, true},
		{"skills folder is a link", func(t *testing.T, dir string) {
			real := filepath.Join(t.TempDir(), "skills")
			mustRename(t, filepath.Join(dir, SkillsDir), real)
			mustSymlink(t, real, filepath.Join(dir, SkillsDir))
		}, false, []problem{{SkillsDir, "", "is a symbolic link", "real folder", false}}, true},
		{"dotfiles in skills are ignored", func(t *testing.T, dir string) {
			must(t, os.WriteFile(filepath.Join(dir, SkillsDir, ".DS_Store"), []byte{0, 1}, 0o644))
		}, true, nil, true},
		{"manifest is a folder", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, ManifestFile)))
			must(t, os.Mkdir(filepath.Join(dir, ManifestFile), 0o755))
		}, false, []problem{{ManifestFile, "", "is not a regular file", "plain file", false}}, false},
		{"no manifest", func(t *testing.T, dir string) {
			must(t, os.Remove(filepath.Join(dir, ManifestFile)))
		}, false, []problem{{ManifestFile, "", "has no manifest.json", "create manifest.json", false}}, false},
	}
	highRisk := problem{ManifestFile, "/provides/tools/1/risk_level", "high-risk", "low", true}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := copyPlugin(t, "good-plugin")
			tt.setup(t, dir)
			m, probs := Check(dir, Options{})
			if (m != nil) != tt.ok {
				t.Errorf("manifest returned = %v, want %v", m != nil, tt.ok)
			}
			want := tt.expect
			if tt.loaded {
				want = append(want, highRisk)
			}
			assertCheck(t, dir, probs, want)
			// Load applies the same refusal of the manifest.
			_, err := Load(dir, Options{})
			manifestErr := slices.ContainsFunc(tt.expect, func(p problem) bool { return p.file == ManifestFile })
			if (err != nil) != manifestErr {
				t.Errorf("Load err = %v, want error %v", err, manifestErr)
			}
		})
	}
}

// TestCheckLinkedFolder: a plugin folder that is itself a symbolic link
// (plugins are often linked into $CARAPACE_HOME/plugins) is checked where it
// leads, and its manifest is inside it.
func TestCheckLinkedFolder(t *testing.T) {
	real := copyPlugin(t, "good-plugin")
	link := filepath.Join(t.TempDir(), "linked-plugin")
	mustSymlink(t, real, link)
	m, probs := Check(link, Options{})
	if m == nil || len(errorsOnly(probs)) > 0 {
		t.Fatalf("Check: %v", probs)
	}
	if _, err := Load(link, Options{}); err != nil {
		t.Fatal(err)
	}
}

func TestLoadSize(t *testing.T) {
	good, err := os.ReadFile(filepath.Join(plugin("good-plugin"), ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"exactly 1 MiB", pad(good, MaxSize), ""},
		{"1 MiB and a byte", pad(good, MaxSize+1), "is 1048577 bytes; a manifest may be at most 1048576 (1 MiB)"},
		{"64 MiB", pad(good, 64<<20), "at most 1048576"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "p")
			must(t, os.Mkdir(dir, 0o755))
			must(t, os.WriteFile(filepath.Join(dir, ManifestFile), tc.data, 0o644))
			m, err := Load(dir, Options{})
			if tc.want == "" {
				if err != nil || m == nil {
					t.Fatalf("Load: %v", err)
				}
				return
			}
			var e *Error
			if !errors.As(err, &e) || len(e.Problems) != 1 || !strings.Contains(e.Problems[0].Message, tc.want) || e.Problems[0].Fix == "" {
				t.Fatalf("Load err = %v, want %q", err, tc.want)
			}
		})
	}
}

// pad fills a JSON document with trailing spaces up to n bytes.
func pad(doc []byte, n int) []byte {
	return append(bytes.Clone(doc), bytes.Repeat([]byte(" "), n-len(doc))...)
}

func TestLoadProblemsArePathsOfTheFile(t *testing.T) {
	dir := copyPlugin(t, "good-plugin")
	must(t, os.WriteFile(filepath.Join(dir, ManifestFile), []byte(`{"description": 1}`), 0o644))
	_, err := Load(dir, Options{})
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v", err)
	}
	for _, p := range e.Problems {
		if p.File != filepath.Join(dir, ManifestFile) {
			t.Errorf("problem names %q", p.File)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func mustRename(t *testing.T, from, to string) { t.Helper(); must(t, os.Rename(from, to)) }

func mustSymlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil && !errors.Is(err, fs.ErrExist) {
		t.Fatal(err)
	}
}
