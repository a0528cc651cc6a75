package applecontainer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/runtime"
)

func TestName(t *testing.T) {
	if got := New(Options{}).Name(); got != "apple" {
		t.Errorf("Name() = %q, want apple", got)
	}
}

func TestCheck(t *testing.T) {
	const restart = "`container system stop`, then `container system start`"
	tests := []struct {
		version string
		want    string   // Info.Version when it succeeds
		errHas  []string // substrings of the error when it fails
		calls   []string // the subcommands run, in order
	}{
		{version: "0.12.3", errHas: []string{"0.12.3 is too old", "1.1.0 or later", "1.2.1 or later recommended",
			"https://github.com/apple/container/releases", "-v", "PR #1751", "could not reach the core"},
			calls: []string{"--version"}},
		{version: "1.0.0", errHas: []string{"1.0.0 is too old", "1.1.0 or later", "PR #1751", "could not reach the core",
			"https://github.com/apple/container/releases"},
			calls: []string{"--version"}},
		// The API server's version is its banner, as recorded on 1.1.0.
		{version: "1.1.0", want: "1.1.0", calls: []string{"--version", "system"}},
		{version: "1.2.2", want: "1.2.2", calls: []string{"--version", "system"}},
		// Homebrew's build: "commit: unspeci".
		{version: "1.2.2-homebrew", want: "1.2.2", calls: []string{"--version", "system"}},
		// A development build is its release plus commits, not below it.
		{version: "1.1.0-dev", want: "1.1.0+23.g7b94575", calls: []string{"--version", "system"}},
		// 1.4.1 nests the server's version under "server".
		{version: "1.4.1", want: "1.4.1", calls: []string{"--version", "system"}},
		// --version printed nothing recognisable: system version tells.
		{version: "1.2.2-oddversion", want: "1.2.2", calls: []string{"--version", "system", "system"}},
		// MacPorts' port up to 1.2.0 says no version at all.
		{version: "macports-1.2.0", errHas: []string{"cannot tell the version of the Apple container CLI", "container CLI version  (build: release, commit: )",
			"MacPorts", "sudo port upgrade container", "https://github.com/apple/container/releases"},
			calls: []string{"--version", "system"}},
		{version: "1.2.2-stopped", errHas: []string{"not running", "`container system start`"}, calls: []string{"--version", "system"}},
		{version: "1.2.2-unregistered", errHas: []string{"unregistered", "`container system start`"}, calls: []string{"--version", "system"}},
		{version: "1.4.1-stopped", errHas: []string{"not running", "`container system start`"}, calls: []string{"--version", "system"}},
		// An upgraded CLI whose old services still run: a 1.0.0 server
		// left by an upgrade, in either shape of the status.
		{version: "1.2.2-oldserver", errHas: []string{"API server 1.0.0 is too old", restart, "PR #1751"},
			calls: []string{"--version", "system"}},
		{version: "1.4.1-oldserver", errHas: []string{"API server is 1.2.2 but the CLI is 1.4.1", restart},
			calls: []string{"--version", "system"}},
		{version: "1.2.2-server1.1.0", errHas: []string{"API server is 1.1.0 but the CLI is 1.2.2", restart},
			calls: []string{"--version", "system"}},
		// A server whose version cannot be read is refused, showing it.
		{version: "1.2.2-macportsserver", errHas: []string{`apiServerVersion "container-apiserver version  (build: release, commit: )"`,
			"empty version", restart}, calls: []string{"--version", "system"}},
		{version: "1.2.2-noserverversion", errHas: []string{"no API server version", `"apiServerVersion":""`, restart},
			calls: []string{"--version", "system"}},
		// 1.5.0: a kernel installed, as `container system kernel set
		// --recommended` leaves it.
		{version: "1.5.0", want: "1.5.0", calls: []string{"--version", "system"}},
		// A fresh installation: the services run, kernels/ has no kernel,
		// and every container would fail to start.
		{version: "1.5.0-nokernel", errHas: []string{"no kernel", "1.5.0-nokernel/appRoot/kernels", "`container system kernel set --recommended`",
			"every container fails to start"}, calls: []string{"--version", "system"}},
		// An upgrade to 1.5.0 that left the 1.4.1 services running.
		{version: "1.5.0-oldserver", errHas: []string{"API server is 1.4.1 but the CLI is 1.5.0", "before an upgrade", restart},
			calls: []string{"--version", "system"}},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.version, nil)
			info, err := f.engine(t).Check(context.Background())
			if got := f.commands(t); !slices.Equal(got, tt.calls) {
				t.Errorf("ran %q, want %q", got, tt.calls)
			}
			if tt.errHas != nil {
				if !errors.Is(err, runtime.ErrUnavailable) {
					t.Fatalf("err = %v, want ErrUnavailable", err)
				}
				for _, s := range tt.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error does not say %q: %v", s, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := runtime.Info{Engine: "apple", Version: tt.want, Bin: f.bin, BinFrom: "configured"}
			if info != want {
				t.Errorf("info = %+v, want %+v", info, want)
			}
		})
	}
}

// The kernel's place, <appRoot>/kernels/default.kernel-<arch>, in every
// state a Mac can leave it: only a default kernel that resolves to a file
// passes, and the message says what was found and the fix.
func TestCheckKernel(t *testing.T) {
	tests := []struct {
		name   string
		make   func(t *testing.T, root string) // builds appRoot
		errHas string                          // "": Check passes
	}{
		{"a kernel set", func(t *testing.T, root string) {
			mkdir(t, filepath.Join(root, "kernels"))
			writeFile(t, filepath.Join(root, "kernels", "vmlinux-6.12"), "kernel", 0o644)
			symlink(t, "vmlinux-6.12", filepath.Join(root, "kernels", "default.kernel-arm64"))
		}, ""},
		{"a kernel copied in as a file", func(t *testing.T, root string) {
			mkdir(t, filepath.Join(root, "kernels"))
			writeFile(t, filepath.Join(root, "kernels", "default.kernel-arm64"), "kernel", 0o644)
		}, ""},
		{"no kernels folder", func(t *testing.T, root string) { mkdir(t, root) }, "kernels does not exist"},
		{"no appRoot at all", func(t *testing.T, root string) {}, "kernels does not exist"},
		{"an empty kernels folder", func(t *testing.T, root string) { mkdir(t, filepath.Join(root, "kernels")) }, "holds no default kernel"},
		{"a kernel but no default", func(t *testing.T, root string) {
			mkdir(t, filepath.Join(root, "kernels"))
			writeFile(t, filepath.Join(root, "kernels", "vmlinux-6.12"), "kernel", 0o644)
		}, "holds no default kernel"},
		{"a default whose kernel was removed", func(t *testing.T, root string) {
			mkdir(t, filepath.Join(root, "kernels"))
			symlink(t, "vmlinux-gone", filepath.Join(root, "kernels", "default.kernel-arm64"))
		}, "default.kernel-arm64 points to a kernel that is not there"},
		{"an empty default kernel", func(t *testing.T, root string) {
			mkdir(t, filepath.Join(root, "kernels"))
			writeFile(t, filepath.Join(root, "kernels", "default.kernel-arm64"), "", 0o644)
		}, "default.kernel-arm64 is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := filepath.Join(t.TempDir(), "com.apple.container")
			tt.make(t, root)
			f := newFake(t, "1.5.0", map[string]string{"FAKE_CONTAINER_APP_ROOT": root})
			info, err := f.engine(t).Check(context.Background())
			if tt.errHas == "" {
				if err != nil || info.Version != "1.5.0" {
					t.Fatalf("Check: %+v, %v", info, err)
				}
				return
			}
			if !errors.Is(err, runtime.ErrUnavailable) {
				t.Fatalf("err = %v, want ErrUnavailable", err)
			}
			for _, s := range []string{tt.errHas, filepath.Join(root, "kernels"), "`container system kernel set --recommended`"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not say %q: %v", s, err)
				}
			}
		})
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func TestCheckStatusCommand(t *testing.T) {
	f := newFake(t, "1.2.2", nil)
	if _, err := f.engine(t).Check(context.Background()); err != nil {
		t.Fatal(err)
	}
	calls := f.calls(t)
	if want := []string{"system", "status", "--format", "json"}; !slices.ContainsFunc(calls, func(c []string) bool { return slices.Equal(c, want) }) {
		t.Errorf("calls %q, want one of %q", calls, want)
	}
}

func TestCheckNotInstalled(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		bin  string
	}{
		{"absolute path", filepath.Join(dir, "nowhere", "container")},
		{"name not on PATH", "container-that-is-not-installed"},
		{"not executable", writeFile(t, filepath.Join(dir, "container"), "#!/bin/sh\n", 0o644)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := New(Options{Bin: tt.bin, Logger: testLogger(t)})
			_, err := e.Check(context.Background())
			if !errors.Is(err, runtime.ErrUnavailable) {
				t.Fatalf("err = %v, want ErrUnavailable", err)
			}
			for _, s := range []string{"not installed", "https://github.com/apple/container/releases", "1.1.0 or later"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error does not say %q: %v", s, err)
				}
			}
		})
	}
}

// The default Bin is looked up on PATH, then where Apple's installer,
// Homebrew and MacPorts put it: a LaunchAgent's PATH has none of them.
func TestDefaultBin(t *testing.T) {
	wantInstalls := []install{
		{"/usr/local/bin/container", "Apple's installer package"},
		{"/opt/homebrew/bin/container", "Homebrew"},
		{"/opt/local/bin/container", "MacPorts"},
	}
	if e := New(Options{}); !slices.Equal(e.fallbacks, wantInstalls) {
		t.Errorf("fallbacks = %q, want %q", e.fallbacks, wantInstalls)
	}
	if e := New(Options{Bin: "/somewhere/container"}); e.fallbacks != nil {
		t.Errorf("a configured Bin has fallbacks %q", e.fallbacks)
	}
	f := newFake(t, "1.2.2-homebrew", nil)
	missing := filepath.Join(t.TempDir(), "container")
	tests := []struct {
		name      string
		path      string // PATH
		fallbacks []install
		wantBin   string
		wantFrom  string
	}{
		{"on PATH", filepath.Dir(f.bin), nil, f.bin, "PATH"},
		{"PATH wins over the installers' places", filepath.Dir(f.bin), []install{{missing, "Apple's installer package"}}, f.bin, "PATH"},
		{"Apple's package", t.TempDir(), []install{{f.bin, "Apple's installer package"}, {missing, "Homebrew"}}, f.bin, "Apple's installer package, not on PATH"},
		{"Homebrew", t.TempDir(), []install{{missing, "Apple's installer package"}, {f.bin, "Homebrew"}, {missing, "MacPorts"}}, f.bin, "Homebrew, not on PATH"},
		{"MacPorts", t.TempDir(), []install{{missing, "Apple's installer package"}, {missing, "Homebrew"}, {f.bin, "MacPorts"}}, f.bin, "MacPorts, not on PATH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("PATH", tt.path)
			e := New(Options{Logger: testLogger(t)})
			e.fallbacks = tt.fallbacks
			info, err := e.Check(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if info.Bin != tt.wantBin || info.BinFrom != tt.wantFrom {
				t.Errorf("Bin %q from %q, want %q from %q", info.Bin, info.BinFrom, tt.wantBin, tt.wantFrom)
			}
		})
	}
	t.Run("nowhere", func(t *testing.T) {
		t.Setenv("PATH", t.TempDir())
		e := New(Options{Logger: testLogger(t)})
		e.fallbacks = []install{{missing, "Homebrew"}, {filepath.Join(t.TempDir(), "nope"), "MacPorts"}}
		_, err := e.Check(context.Background())
		if !errors.Is(err, runtime.ErrUnavailable) || !strings.Contains(err.Error(), "not installed") || !strings.Contains(err.Error(), missing) {
			t.Fatalf("err = %v, want ErrUnavailable naming the places looked at", err)
		}
	})
}

func TestList(t *testing.T) {
	tests := []struct {
		version, key, value string
		want                []string
	}{
		// Before 1.0.0: PrintableContainer, "status":"running".
		{"0.12.3", runtime.LabelInstance, "7f3a9c", []string{"carapace-s1", "carapace-s2"}},
		{"0.12.3", runtime.LabelSession, "s3", []string{"carapace-s3"}},
		// From 1.0.0: ManagedContainer, "status":{"state":"running"}.
		{"1.0.0", runtime.LabelInstance, "7f3a9c", []string{"carapace-s1", "carapace-s2"}},
		{"1.2.2", runtime.LabelInstance, "0b12de", []string{"carapace-s3"}},
		{"1.2.2", runtime.LabelInstance, "nobody", nil},
		// A label's absence is not an empty value.
		{"1.2.2", runtime.LabelInstance, "", nil},
		{"1.2.2-oddversion", runtime.LabelInstance, "7f3a9c", nil}, // "[]"
	}
	for _, tt := range tests {
		t.Run(tt.version+"/"+tt.key+"="+tt.value, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.version, nil)
			got, err := f.engine(t).List(context.Background(), tt.key, tt.value)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("List = %q, want %q", got, tt.want)
			}
			if calls := f.calls(t); len(calls) != 1 || !slices.Equal(calls[0], []string{"list", "--all", "--format", "json"}) {
				t.Errorf("calls = %q", calls)
			}
		})
	}
}

func TestListServicesDown(t *testing.T) {
	f := newFake(t, "1.2.2-stopped", nil)
	_, err := f.engine(t).List(context.Background(), runtime.LabelInstance, "7f3a9c")
	if !errors.Is(err, runtime.ErrUnavailable) || !strings.Contains(err.Error(), "container system start") {
		t.Errorf("err = %v, want ErrUnavailable saying to run container system start", err)
	}
}

func TestParseList(t *testing.T) {
	for _, v := range []string{"0.12.3", "1.0.0", "1.1.0", "1.2.2"} {
		t.Run(v, func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join("testdata", "versions", v, "list.json"))
			if err != nil {
				t.Fatal(err)
			}
			cs, err := parseList(b)
			if err != nil {
				t.Fatal(err)
			}
			want := []container{
				{Name: "carapace-s1", State: "running", Labels: map[string]string{runtime.LabelInstance: "7f3a9c", runtime.LabelSession: "s1", runtime.LabelVersion: "0.4.0"}},
				{Name: "carapace-s2", State: "stopped", Labels: map[string]string{runtime.LabelInstance: "7f3a9c", runtime.LabelSession: "s2", runtime.LabelVersion: "0.4.0"}},
				{Name: "carapace-s3", State: "running", Labels: map[string]string{runtime.LabelInstance: "0b12de", runtime.LabelSession: "s3", runtime.LabelVersion: "0.3.9"}},
				{Name: "buildkit", State: "running", Labels: map[string]string{}},
			}
			if len(cs) != len(want) {
				t.Fatalf("got %d containers, want %d: %+v", len(cs), len(want), cs)
			}
			for i := range want {
				if cs[i].Name != want[i].Name || cs[i].State != want[i].State || !mapsEqual(cs[i].Labels, want[i].Labels) {
					t.Errorf("container %d = %+v, want %+v", i, cs[i], want[i])
				}
			}
		})
	}
}

func TestParseListEdges(t *testing.T) {
	tests := []struct {
		name, in string
		want     []container
		err      bool
	}{
		{"nothing printed", "", nil, false},
		{"empty", "[]\n", []container{}, false},
		{"id only at the top", `[{"id":"a1","configuration":{},"status":{"state":"stopping"}}]`, []container{{Name: "a1", State: "stopping"}}, false},
		{"no status", `[{"configuration":{"id":"a1","labels":{"k":"v"}}}]`, []container{{Name: "a1", Labels: map[string]string{"k": "v"}}}, false},
		{"no id", `[{"configuration":{"labels":{}},"status":"running"}]`, nil, true},
		{"status of another type", `[{"configuration":{"id":"a1"},"status":3}]`, nil, true},
		{"a table", "ID  IMAGE  OS  ARCH  STATE\n", nil, true},
		{"an object", `{"id":"a1"}`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseList([]byte(tt.in))
			if (err != nil) != tt.err {
				t.Fatalf("err = %v", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
			for i := range got {
				if got[i].Name != tt.want[i].Name || got[i].State != tt.want[i].State || !mapsEqual(got[i].Labels, tt.want[i].Labels) {
					t.Errorf("got %+v, want %+v", got[i], tt.want[i])
				}
			}
		})
	}
}

func TestStop(t *testing.T) {
	tests := []struct {
		name     string
		exists   bool
		wantLeft []string
	}{
		{"missing container is not an error", false, nil},
		{"existing container stopped and deleted", true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, "1.2.2", nil)
			if tt.exists {
				writeFile(t, filepath.Join(f.state, "carapace-s9"), "running\n", 0o644)
			}
			if err := f.engine(t).Stop(context.Background(), "carapace-s9"); err != nil {
				t.Fatal(err)
			}
			want := [][]string{{"stop", "-t", "5", "carapace-s9"}, {"delete", "-f", "carapace-s9"}}
			if got := f.calls(t); !slices.EqualFunc(got, want, slices.Equal) {
				t.Errorf("calls %q, want %q", got, want)
			}
			if left := f.containers(t); !slices.Equal(left, tt.wantLeft) {
				t.Errorf("containers left: %q", left)
			}
		})
	}
}

func TestStopErrors(t *testing.T) {
	f := newFake(t, "1.2.2-stopped", nil)
	e := f.engine(t)
	if err := e.Stop(context.Background(), "-a"); !errors.Is(err, runtime.ErrInvalidSpec) {
		t.Errorf("Stop(-a) = %v, want ErrInvalidSpec", err)
	}
	if len(f.calls(t)) != 0 {
		t.Errorf("ran the CLI for an invalid name: %q", f.calls(t))
	}
	// The services are down: stop and delete fail with the XPC error.
	err := e.Stop(context.Background(), "carapace-s9")
	if !errors.Is(err, runtime.ErrUnavailable) || !strings.Contains(err.Error(), "container system start") {
		t.Errorf("Stop with the services down = %v, want ErrUnavailable saying to run container system start", err)
	}
	if got, want := f.commands(t), []string{"stop", "delete"}; !slices.Equal(got, want) {
		t.Errorf("ran %q, want %q", got, want)
	}
}

func TestNotFoundMessages(t *testing.T) {
	for _, v := range []string{"0.12.3", "1.0.0", "1.1.0", "1.2.2"} {
		for _, cmd := range []string{"stop", "delete"} {
			b, err := os.ReadFile(filepath.Join("testdata", "versions", v, cmd+"-notfound.err"))
			if err != nil {
				t.Fatal(err)
			}
			if !isNotFound(&cliError{args: []string{cmd}, code: 1, stderr: string(b)}) {
				t.Errorf("%s %s: not recognised as not found: %s", v, cmd, b)
			}
		}
	}
	for _, stderr := range []string{
		`Error: internalError: "failed to stop container" (cause: "invalidState: "container is stopping"")`,
		`Error: interrupted: "XPC connection error: Connection invalid"`,
		"",
	} {
		if isNotFound(&cliError{code: 1, stderr: stderr}) {
			t.Errorf("%q taken for not found", stderr)
		}
	}
}

func writeFile(t *testing.T, path, content string, mode os.FileMode) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
