package docker

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/carapace-dev/carapace/core/runtime"
	"github.com/carapace-dev/carapace/internal/testutil"
)

// fullSpec is a Spec with every field set, in no particular order.
func fullSpec() runtime.Spec {
	return runtime.Spec{
		Name:  "carapace-s1",
		Image: "carapace-agent:1.0",
		Labels: map[string]string{
			runtime.LabelVersion: "1.0", runtime.LabelSession: "s1", runtime.LabelInstance: "ab12",
		},
		Mounts: []runtime.Mount{
			{Source: "/h/run/sessions/s1.sock", Target: runtime.SocketPath},
			{Source: "/h/groups/main/workspace", Target: runtime.WorkspacePath},
			{Source: "/h/groups/main/claude", Target: runtime.ClaudeDir},
			{Source: "/h/run/s1/skills", Target: runtime.SkillsPath, ReadOnly: true},
			{Source: "/h/run/s1/CLAUDE.md", Target: runtime.ClaudeMDPath, ReadOnly: true},
		},
		Env:    []string{"CARAPACE_PROMPT_FILE=/workspace/.prompt", "A=b=c", "EMPTY="},
		Cmd:    []string{"--prompt", "tool.invoke.echo {\"message\": \"hi there\"}"},
		Limits: runtime.DefaultLimits,
	}
}

// The flag set is pinned by a golden file, one argument per line: a
// change to the hardening shows up in review as a diff of that file.
func TestRunArgsGolden(t *testing.T) {
	for _, tc := range []struct {
		golden string
		spec   func() runtime.Spec
	}{
		{"run-args.golden", fullSpec},
		{"run-args-minimal.golden", func() runtime.Spec {
			// No limits (the engine's defaults), no mounts, the image's
			// command, another user: $HOME's tmpfs follows the user.
			return runtime.Spec{Name: "carapace-s2", Image: "img", User: "1001:1002"}
		}},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			s := tc.spec()
			if err := s.Check(); err != nil {
				t.Fatal(err)
			}
			args, err := runArgs(s)
			if err != nil {
				t.Fatal(err)
			}
			testutil.Golden(t, filepath.Join("testdata", tc.golden), []byte(strings.Join(args, "\n")+"\n"))
		})
	}
}

// Whatever the Spec, the hardening flags are there, and nothing that
// would undo them is.
func TestRunArgsAlwaysHardened(t *testing.T) {
	s := fullSpec()
	s.Cmd = []string{"--privileged", "-v", "/var/run/docker.sock:/var/run/docker.sock"} // after the image: the agent's own arguments
	args, err := runArgs(s)
	if err != nil {
		t.Fatal(err)
	}
	img := -1
	for i, a := range args {
		if a == s.Image {
			img = i
		}
	}
	if img < 0 || strings.Join(args[img+1:], " ") != strings.Join(s.Cmd, " ") {
		t.Fatalf("the command must follow the image: %q", args)
	}
	flags := " " + strings.Join(args[:img], " ") + " "
	for _, want := range []string{
		" --rm ", " --pull never ", " --network none ", " --read-only ", " --cap-drop ALL ",
		" --security-opt no-new-privileges ", " --init ", " --user 1000:1000 ",
		" --tmpfs /tmp:rw,nosuid,nodev,noexec,size=64m ",
		" --tmpfs /home/agent:rw,nosuid,nodev,size=256m,uid=1000,gid=1000 ",
		" --pids-limit 256 ", " --memory 4096m ", " --cpus 2 ",
	} {
		if !strings.Contains(flags, want) {
			t.Errorf("missing %q in %s", want, flags)
		}
	}
	for _, bad := range []string{"--privileged", "docker.sock", "seccomp", "apparmor", "--cap-add", "--network host", " --pid ", " --ipc ", "--userns", "--device"} {
		if strings.Contains(flags, bad) {
			t.Errorf("%q in %s", bad, flags)
		}
	}
}

func TestRunArgsRejects(t *testing.T) {
	for name, edit := range map[string]func(*runtime.Spec){
		"user name":       func(s *runtime.Spec) { s.User = "agent" },
		"user injection":  func(s *runtime.Spec) { s.User = "1000:1000,uid=0" },
		"gid only":        func(s *runtime.Spec) { s.User = ":1000" },
		"negative memory": func(s *runtime.Spec) { s.Limits.MemoryMB = -1 },
		"negative cpus":   func(s *runtime.Spec) { s.Limits.CPUs = -0.5 },
	} {
		t.Run(name, func(t *testing.T) {
			s := fullSpec()
			edit(&s)
			if _, err := runArgs(s); !errors.Is(err, runtime.ErrInvalidSpec) {
				t.Fatalf("runArgs: %v, want ErrInvalidSpec", err)
			}
		})
	}
}

func TestRedactEnv(t *testing.T) {
	got := strings.Join(redactEnv([]string{"run", "-e", "KEY=secret", "-e", "A=", "img", "-e", "X=y"}), " ")
	if strings.Contains(got, "secret") || !strings.Contains(got, "-e KEY=…") {
		t.Fatalf("redactEnv: %s", got)
	}
}

// A user without a group: $HOME's tmpfs gets the uid only.
func TestRunArgsUIDOnly(t *testing.T) {
	s := fullSpec()
	s.User = "1001"
	args, err := runArgs(s)
	if err != nil {
		t.Fatal(err)
	}
	flags := strings.Join(args, " ")
	if !strings.Contains(flags, " --tmpfs /home/agent:rw,nosuid,nodev,size=256m,uid=1001 ") || !strings.Contains(flags, " --user 1001 ") {
		t.Fatalf("uid-only user: %s", flags)
	}
}
