package runtime

import (
	"errors"
	"testing"
)

func TestSpecCheck(t *testing.T) {
	good := func() Spec {
		return Spec{Name: "carapace-s-abc", Image: "carapace-agent-test:dev", User: "1000:1000",
			Labels: map[string]string{LabelSession: "s-abc"},
			Mounts: []Mount{
				{Source: "/h/run/sessions/s-abc.sock", Target: SocketPath},
				{Source: "/h/run/agent/s-abc/skills", Target: SkillsPath, ReadOnly: true},
				{Source: "/h/run/agent/s-abc/CLAUDE.md", Target: ClaudeMDPath, ReadOnly: true},
			},
			Env: []string{"HOME=/home/agent", "EMPTY="},
		}
	}
	if s := good(); s.Check() != nil {
		t.Fatalf("a good spec is refused: %v", s.Check())
	}
	for _, tc := range []struct {
		name string
		edit func(*Spec)
	}{
		{"one-letter name", func(s *Spec) { s.Name = "c" }},
		{"name with a slash", func(s *Spec) { s.Name = "carapace/x" }},
		{"name as an option", func(s *Spec) { s.Name = "-rm" }},
		{"no image", func(s *Spec) { s.Image = "" }},
		{"image as an option", func(s *Spec) { s.Image = "--privileged" }},
		{"relative source", func(s *Spec) { s.Mounts[0].Source = "run/x.sock" }},
		{"unclean target", func(s *Spec) { s.Mounts[1].Target = "/home/agent/../etc" }},
		{"colon in a source", func(s *Spec) { s.Mounts[1].Source = "/h/a:/etc" }},
		{"comma in a target", func(s *Spec) { s.Mounts[1].Target = "/x,readonly=false" }},
		{"target twice", func(s *Spec) { s.Mounts[2].Target = SkillsPath }},
		{"nested source", func(s *Spec) { s.Mounts = append(s.Mounts, Mount{Source: "/h/run/agent", Target: "/a"}) }},
		{"env without =", func(s *Spec) { s.Env = append(s.Env, "HOME") }},
		{"env key as an option", func(s *Spec) { s.Env = append(s.Env, "-e=x") }},
		{"label as an option", func(s *Spec) { s.Labels["-l"] = "x" }},
		{"user name", func(s *Spec) { s.User = "root" }},
		{"user with spaces", func(s *Spec) { s.User = "0 --privileged" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := good()
			tc.edit(&s)
			if err := s.Check(); !errors.Is(err, ErrInvalidSpec) {
				t.Errorf("Check() = %v, want ErrInvalidSpec", err)
			}
		})
	}
}
