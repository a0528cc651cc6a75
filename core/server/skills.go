package server

import (
	"fmt"
	"os"

	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/intrinsics"
	"github.com/carapace-dev/carapace/core/skills"
)

// skillsDir is the session's assembled skill tree.
func (s *Server) skillsDir(session string) string {
	return s.opts.Home.Path("run", "skills", session)
}

// assembleSkills writes the session's read-only skill tree: one SKILL.md
// per healthy plugin plus the intrinsics'. A plugin that failed or crashed
// teaches the agent nothing (seed 000 §Initialization Failure Behavior).
func (s *Server) assembleSkills(session string) error {
	var ps []skills.Plugin
	for _, st := range s.healthyPlugins() {
		if err := skills.CheckName(st.name); err != nil {
			// Claude Code would refuse the skill (e.g. a name containing
			// "claude"); the tools still work, the agent is not taught them.
			s.log.Warn("plugin name cannot be a skill name; its skill is left out", "plugin", st.name, "err", err)
			continue
		}
		ps = append(ps, skills.Plugin{Name: st.name, Manifest: st.manifest, Skills: st.skills})
	}
	var its []*catalog.Tool
	for _, t := range s.catalog.List() {
		if t.Plugin == intrinsics.Plugin {
			its = append(its, t)
		}
	}
	in := skills.IntrinsicsFrom(its)
	if err := os.MkdirAll(s.opts.Home.Path("run", "skills"), 0o700); err != nil {
		return fmt.Errorf("skills folder: %w", err)
	}
	if err := skills.Assemble(s.skillsDir(session), ps, in); err != nil {
		return fmt.Errorf("assemble the skills of session %s: %w", session, err)
	}
	return nil
}

// removeSkills deletes a session's skill tree.
func (s *Server) removeSkills(session string) {
	if err := skills.Remove(s.skillsDir(session)); err != nil && !os.IsNotExist(err) {
		s.log.Warn("could not remove a session's skills", "session", session, "err", err)
	}
}

// clearSkills removes every session's skill tree: at start (left by a core
// that crashed) and at shutdown.
func (s *Server) clearSkills() {
	dir := s.opts.Home.Path("run", "skills")
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		s.removeSkills(e.Name())
	}
}
