package applecontainer

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// host is a session's files on the host, laid out as the core lays them out.
type host struct {
	root    string // every host path but the socket's is under it
	sockDir string // the socket's directory, 0700: short, for sun_path
	sock    string
}

// newHost creates a session's host files: a socket (mode 0666 in a 0700
// directory), a workspace, the group's Claude Code state, and read-only
// skills, CLAUDE.md and settings.json.
func newHost(t *testing.T) *host {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sockDir, err := os.MkdirTemp("", "ac")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(sockDir) })
	if sockDir, err = filepath.EvalSymlinks(sockDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sockDir, 0o700); err != nil {
		t.Fatal(err)
	}
	h := &host{root: root, sockDir: sockDir, sock: filepath.Join(sockDir, "s1.sock")}
	l, err := net.Listen("unix", h.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := os.Chmod(h.sock, 0o666); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"groups/main/workspace", "groups/main/claude", "run/s1/skills"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"run/s1/CLAUDE.md", "run/s1/settings.json"} {
		if err := os.WriteFile(filepath.Join(root, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// spec is a full Spec of an agent session on h.
func (h *host) spec() runtime.Spec {
	return runtime.Spec{
		Name:  "carapace-s1",
		Image: "ghcr.io/carapace-dev/agent:0.4.0",
		Labels: map[string]string{
			runtime.LabelSession:  "s1",
			runtime.LabelInstance: "7f3a9c",
			runtime.LabelVersion:  "0.4.0",
		},
		Mounts: []runtime.Mount{
			{Source: h.sock, Target: runtime.SocketPath},
			{Source: filepath.Join(h.root, "groups/main/workspace"), Target: runtime.WorkspacePath},
			{Source: filepath.Join(h.root, "groups/main/claude"), Target: runtime.ClaudeDir},
			{Source: filepath.Join(h.root, "run/s1/skills"), Target: runtime.SkillsPath, ReadOnly: true},
			{Source: filepath.Join(h.root, "run/s1/CLAUDE.md"), Target: runtime.ClaudeMDPath, ReadOnly: true},
			{Source: filepath.Join(h.root, "run/s1/settings.json"), Target: runtime.SettingsPath, ReadOnly: true},
		},
		Env: []string{
			"HOME=" + runtime.HomePath,
			"ANTHROPIC_BASE_URL=http://127.0.0.1:8787",
			"ANTHROPIC_API_KEY=placeholder",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		},
		Cmd:    []string{"claude", "-p", "--output-format", "stream-json"},
		Limits: runtime.DefaultLimits,
	}
}

// generic replaces h's temporary directories in args by $ROOT and $SOCKDIR.
func (h *host) generic(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		a = strings.ReplaceAll(a, h.sockDir, "$SOCKDIR")
		out[i] = strings.ReplaceAll(a, h.root, "$ROOT")
	}
	return out
}

func TestRunArgsGolden(t *testing.T) {
	h := newHost(t)
	args, err := runArgs(h.spec())
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(h.generic(args), "\n") + "\n"
	testutil.Golden(t, filepath.Join("testdata", "golden", "run.args"), []byte(got))
}

// flagPairs returns args's "flag value" pairs and lone flags, up to the
// image, as "flag value" or "flag" strings.
func flagPairs(t *testing.T, args []string) []string {
	t.Helper()
	loneFlags := []string{"--rm", "--no-dns", "--read-only", "--init"}
	var out []string
	for i := 1; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			break
		}
		if slices.Contains(loneFlags, a) {
			out = append(out, a)
			continue
		}
		if i+1 >= len(args) {
			t.Fatalf("flag %s has no value", a)
		}
		out = append(out, a+" "+args[i+1])
		i++
	}
	return out
}

func TestRunArgsHardening(t *testing.T) {
	h := newHost(t)
	args, err := runArgs(h.spec())
	if err != nil {
		t.Fatal(err)
	}
	if args[0] != "run" {
		t.Fatalf("args[0] = %q, want run", args[0])
	}
	pairs := flagPairs(t, args)
	for _, want := range []string{
		"--rm", "--name carapace-s1",
		"--network none", "--no-dns",
		"--read-only", "--tmpfs /tmp", "--tmpfs /home/agent",
		"--cap-drop ALL", "--init",
		"--user 1000:1000", "--cpus 2", "--memory 4096M",
		"--label carapace.session=s1", "--label carapace.instance=7f3a9c", "--label carapace.version=0.4.0",
		"-v " + h.sock + ":" + runtime.SocketPath,
		"-e ANTHROPIC_API_KEY=placeholder",
	} {
		if !slices.Contains(pairs, want) {
			t.Errorf("missing %q in %q", want, pairs)
		}
	}
	// Flags Apple's CLI does not have (it would refuse to run), or that
	// would undo the hardening, before the image.
	img := slices.Index(args, "ghcr.io/carapace-dev/agent:0.4.0")
	if img < 0 {
		t.Fatalf("no image in %q", args)
	}
	for _, a := range args[:img] {
		for _, bad := range []string{"--security-opt", "--pids-limit", "--mount", "--privileged", "-d", "--detach", "--publish", "-p", "--publish-socket", "--cap-add", "--dns", "--ssh", "--userns"} {
			if a == bad || strings.HasPrefix(a, bad+"=") {
				t.Errorf("passes %s: %q", bad, args)
			}
		}
	}
	if n := strings.Count(strings.Join(args, " "), "--network"); n != 1 {
		t.Errorf("--network given %d times, want exactly once (none must be the only network)", n)
	}
	// The image, then the command, end the arguments.
	tail := args[len(args)-5:]
	if want := []string{"ghcr.io/carapace-dev/agent:0.4.0", "claude", "-p", "--output-format", "stream-json"}; !slices.Equal(tail, want) {
		t.Errorf("args end with %q, want %q", tail, want)
	}
}

func TestRunArgsLimits(t *testing.T) {
	tests := []struct {
		name   string
		limits runtime.Limits
		want   []string // flag pairs that must be there
		absent []string // flags that must not
		err    error
	}{
		{"default limits", runtime.DefaultLimits, []string{"--cpus 2", "--memory 4096M"}, nil, nil},
		{"fractional cpus round up", runtime.Limits{CPUs: 1.5, MemoryMB: 512}, []string{"--cpus 2", "--memory 512M"}, nil, nil},
		{"a quarter cpu is one", runtime.Limits{CPUs: 0.25}, []string{"--cpus 1"}, []string{"--memory"}, nil},
		{"engine defaults", runtime.Limits{}, nil, []string{"--cpus", "--memory"}, nil},
		{"pids ignored", runtime.Limits{Pids: 64}, nil, []string{"--pids-limit", "--cpus", "--memory"}, nil},
		{"negative cpus", runtime.Limits{CPUs: -1}, nil, nil, runtime.ErrInvalidSpec},
		{"negative memory", runtime.Limits{MemoryMB: -1}, nil, nil, runtime.ErrInvalidSpec},
		{"below Apple's minimum memory", runtime.Limits{MemoryMB: 128}, nil, nil, runtime.ErrInvalidSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := runtime.Spec{Name: "carapace-x", Image: "agent", Limits: tt.limits}
			args, err := runArgs(s)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			pairs := flagPairs(t, args)
			for _, w := range tt.want {
				if !slices.Contains(pairs, w) {
					t.Errorf("missing %q in %q", w, pairs)
				}
			}
			for _, a := range tt.absent {
				if slices.Contains(args, a) {
					t.Errorf("has %s: %q", a, args)
				}
			}
		})
	}
}

func TestRunArgsMounts(t *testing.T) {
	h := newHost(t)
	ws := filepath.Join(h.root, "groups/main/workspace")
	link := filepath.Join(h.root, "ws-link")
	if err := os.Symlink(ws, link); err != nil {
		t.Fatal(err)
	}
	dirLink := filepath.Join(h.root, "sockets")
	if err := os.Symlink(h.sockDir, dirLink); err != nil {
		t.Fatal(err)
	}
	tight := filepath.Join(h.sockDir, "tight.sock")
	l, err := net.Listen("unix", tight)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := os.Chmod(tight, 0o600); err != nil {
		t.Fatal(err)
	}
	colon := filepath.Join(h.root, "a:b")
	if err := os.Mkdir(colon, 0o700); err != nil {
		t.Fatal(err)
	}
	colonLink := filepath.Join(h.root, "colon-link")
	if err := os.Symlink(colon, colonLink); err != nil {
		t.Fatal(err)
	}
	nestLink := filepath.Join(h.root, "nest-link")
	if err := os.Symlink(filepath.Join(ws, "sub"), nestLink); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(ws, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name   string
		mounts []runtime.Mount
		user   string
		want   string // the -v value, when no error
		err    error
	}{
		{"socket", []runtime.Mount{{Source: h.sock, Target: runtime.SocketPath}}, "", h.sock + ":" + runtime.SocketPath, nil},
		{"read-only", []runtime.Mount{{Source: ws, Target: "/ro", ReadOnly: true}}, "", ws + ":/ro:ro", nil},
		{"symlinked source resolved", []runtime.Mount{{Source: link, Target: runtime.WorkspacePath}}, "", ws + ":" + runtime.WorkspacePath, nil},
		{"socket through a symlinked directory resolved", []runtime.Mount{{Source: filepath.Join(dirLink, "s1.sock"), Target: runtime.SocketPath}}, "",
			h.sock + ":" + runtime.SocketPath, nil},
		{"missing source refused", []runtime.Mount{{Source: filepath.Join(h.root, "nope"), Target: "/x"}}, "", "", runtime.ErrInvalidSpec},
		{"dangling symlink refused", []runtime.Mount{{Source: mustDangle(t, h.root), Target: "/x"}}, "", "", runtime.ErrInvalidSpec},
		{"socket others cannot write refused", []runtime.Mount{{Source: tight, Target: runtime.SocketPath}}, "", "", runtime.ErrInvalidSpec},
		{"socket others cannot write is fine for root", []runtime.Mount{{Source: tight, Target: runtime.SocketPath}}, "0:0", tight + ":" + runtime.SocketPath, nil},
		{"source resolving to a path with ':' refused", []runtime.Mount{{Source: colonLink, Target: "/x"}}, "", "", runtime.ErrInvalidSpec},
		{"sources nested once resolved refused", []runtime.Mount{{Source: ws, Target: "/a"}, {Source: nestLink, Target: "/b"}}, "", "", runtime.ErrInvalidSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := runtime.Spec{Name: "carapace-x", Image: "agent", Mounts: tt.mounts, User: tt.user}
			args, err := runArgs(s)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if err != nil {
				return
			}
			var vols []string
			for i, a := range args {
				if a == "-v" {
					vols = append(vols, args[i+1])
				}
			}
			if len(vols) != 1 || vols[0] != tt.want {
				t.Errorf("-v values %q, want [%q]", vols, tt.want)
			}
		})
	}
}

// Single files from one folder share the folder's share on Apple, with the
// first file's options: a mix of read-only and writable is refused, in
// either order and through symbolic links; one mode per folder is fine.
func TestRunArgsFileMountsOfOneFolder(t *testing.T) {
	h := newHost(t)
	agent := filepath.Join(h.root, "run/s1")
	claudeMD, settings := filepath.Join(agent, "CLAUDE.md"), filepath.Join(agent, "settings.json")
	other := filepath.Join(h.root, "groups/main/notes.txt")
	writeFile(t, other, "x", 0o600)
	link := filepath.Join(h.root, "settings-link")
	if err := os.Symlink(settings, link); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		mounts  []runtime.Mount
		wantErr []string // substrings of the error; nil: accepted
	}{
		{"all read-only", []runtime.Mount{
			{Source: claudeMD, Target: runtime.ClaudeMDPath, ReadOnly: true},
			{Source: settings, Target: runtime.SettingsPath, ReadOnly: true},
		}, nil},
		{"all writable", []runtime.Mount{{Source: claudeMD, Target: "/a"}, {Source: settings, Target: "/b"}}, nil},
		{"read-only then writable", []runtime.Mount{
			{Source: claudeMD, Target: runtime.ClaudeMDPath, ReadOnly: true},
			{Source: settings, Target: runtime.SettingsPath},
		}, []string{"mount 0", "mount 1", agent, "both would be read-only", "same mode"}},
		{"writable then read-only", []runtime.Mount{
			{Source: claudeMD, Target: "/a"},
			{Source: settings, Target: "/b", ReadOnly: true},
		}, []string{"both would be writable"}},
		{"mixed through a symbolic link", []runtime.Mount{
			{Source: claudeMD, Target: "/a", ReadOnly: true},
			{Source: link, Target: "/b"},
		}, []string{settings, "both would be read-only"}},
		{"different folders may differ", []runtime.Mount{
			{Source: claudeMD, Target: "/a", ReadOnly: true},
			{Source: other, Target: "/b"},
		}, nil},
		{"a socket is relayed, not shared", []runtime.Mount{
			{Source: h.sock, Target: runtime.SocketPath},
			{Source: writeFile(t, filepath.Join(h.sockDir, "token"), "x", 0o600), Target: "/run/carapace/token", ReadOnly: true},
		}, nil},
		{"a folder and a file beside it", []runtime.Mount{
			{Source: filepath.Join(agent, "skills"), Target: runtime.SkillsPath},
			{Source: claudeMD, Target: runtime.ClaudeMDPath, ReadOnly: true},
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := runArgs(runtime.Spec{Name: "carapace-x", Image: "agent", Mounts: tt.mounts})
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, runtime.ErrInvalidSpec) {
				t.Fatalf("err = %v, want ErrInvalidSpec", err)
			}
			for _, w := range tt.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not say %q: %v", w, err)
				}
			}
		})
	}
}

func mustDangle(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "dangling")
	if err := os.Symlink(filepath.Join(dir, "gone"), p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunArgsRefusesBadSpecs(t *testing.T) {
	tests := []struct {
		name string
		edit func(*runtime.Spec)
	}{
		{"empty name", func(s *runtime.Spec) { s.Name = "" }},
		{"one-character name", func(s *runtime.Spec) { s.Name = "a" }},
		{"name like an option", func(s *runtime.Spec) { s.Name = "--privileged" }},
		{"image like an option", func(s *runtime.Spec) { s.Image = "--privileged" }},
		{"relative mount source", func(s *runtime.Spec) { s.Mounts = []runtime.Mount{{Source: "rel", Target: "/x"}} }},
		{"mount source with ':'", func(s *runtime.Spec) { s.Mounts = []runtime.Mount{{Source: "/a:b", Target: "/x"}} }},
		{"env without '='", func(s *runtime.Spec) { s.Env = []string{"HOME"} }},
		{"env like an option", func(s *runtime.Spec) { s.Env = []string{"--privileged=1"} }},
		{"label like an option", func(s *runtime.Spec) { s.Labels = map[string]string{"--privileged": "1"} }},
		{"user like an option", func(s *runtime.Spec) { s.User = "--privileged" }},
		{"user with spaces", func(s *runtime.Spec) { s.User = "1000 1000" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := runtime.Spec{Name: "carapace-x", Image: "agent"}
			tt.edit(&s)
			if _, err := runArgs(s); !errors.Is(err, runtime.ErrInvalidSpec) {
				t.Errorf("err = %v, want ErrInvalidSpec", err)
			}
		})
	}
}
