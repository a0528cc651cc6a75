package agent

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/core/audit"
	"github.com/carapace-dev/carapace/core/catalog"
	"github.com/carapace-dev/carapace/core/claudemd"
	"github.com/carapace-dev/carapace/core/intrinsics"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/core/skills"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// BriefTimeout bounds the memory brief hook (seed 000 §Memory Brief
// Mechanism): past it the session starts without the brief.
const BriefTimeout = 5 * time.Second

// The files the core prepares for a session's agent live in one folder,
// $CARAPACE_HOME/run/agent/<session>/, read-only, for the runtime to mount:
//
//	skills/<plugin>/SKILL.md   one per healthy plugin, plus carapace-core
//	CLAUDE.md                  the session's instructions and memory brief
//	settings.json              Claude Code's user settings: the environment
//	prompt                     the prompt, for the image's agent (container sessions)
//	shadow, shadow-file        empty, mounted over the places a session could leave
//	                           instructions for the next (container sessions; shadow.go)
const (
	claudeFile   = "CLAUDE.md"
	settingsFile = "settings.json"
)

// agentRoot holds every session's agent folder.
func (r *Runner) agentRoot() string { return r.opts.Home.Path("run", "agent") }

// agentDir is session's agent folder.
func (r *Runner) agentDir(session string) string { return filepath.Join(r.agentRoot(), session) }

// prepareAgent writes session's agent folder: the skill tree, then
// CLAUDE.md with the memory brief of group. Nothing is left behind on error.
func (r *Runner) prepareAgent(ctx context.Context, session, group, runtime, prompt string) error {
	return r.makeAgentDir(session, runtime != "none", func() (map[string][]byte, error) {
		p := claudemd.Params{Group: group, Unisolated: runtime == "none"}
		p.Memory, p.Brief = r.memoryBrief(ctx, session, group)
		files := map[string][]byte{
			claudeFile:   claudemd.Render(p),
			settingsFile: claudemd.Settings(r.cfg.Confirm.Timeout.Duration),
		}
		if prompt != "" {
			files[promptFile] = []byte(prompt)
		}
		return files, nil
	}, nil)
}

// makeAgentDir creates session's agent folder: the skill tree, the files
// files returns (read-only), the shadows of a container session, then
// whatever extra adds; the folder is then made read-only. Nothing is left
// behind on error. prepareAgent and warm.go's prepareWarm fill it.
func (r *Runner) makeAgentDir(session string, shadows bool, files func() (map[string][]byte, error), extra func(dir string) error) (err error) {
	if err := os.MkdirAll(r.agentRoot(), 0o700); err != nil {
		return fmt.Errorf("agent folder: %w", err)
	}
	dir := r.agentDir(session)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("agent folder of session %s: %w", session, err)
	}
	defer func() {
		if err != nil {
			r.removeAgent(session)
		}
	}()
	if err := r.assembleSkills(filepath.Join(dir, "skills")); err != nil {
		return fmt.Errorf("assemble the skills of session %s: %w", session, err)
	}
	fs, err := files()
	if err != nil {
		return err
	}
	for name, data := range fs {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o444); err != nil {
			return fmt.Errorf("write %s of session %s: %w", name, session, err)
		}
	}
	if shadows {
		if err := writeShadows(dir); err != nil {
			return fmt.Errorf("agent folder of session %s: %w", session, err)
		}
	}
	if extra != nil {
		if err := extra(dir); err != nil {
			return fmt.Errorf("agent folder of session %s: %w", session, err)
		}
	}
	if err := os.Chmod(dir, 0o555); err != nil {
		return fmt.Errorf("agent folder of session %s: %w", session, err)
	}
	return nil
}

// assembleSkills writes a read-only skill tree at dir: one SKILL.md per
// healthy plugin plus the intrinsics'. A plugin that failed or crashed
// teaches the agent nothing (seed 000 §Initialization Failure Behavior).
func (r *Runner) assembleSkills(dir string) error {
	var ps []skills.Plugin
	for _, p := range r.opts.Plugins.Healthy() {
		if err := skills.CheckName(p.Name); err != nil {
			// Claude Code would refuse the skill (e.g. a name containing
			// "claude"); the tools still work, the agent is not taught them.
			r.log.Warn("plugin name cannot be a skill name; its skill is left out", "plugin", p.Name, "err", err)
			continue
		}
		ps = append(ps, p)
	}
	var its []*catalog.Tool
	for _, t := range r.opts.Catalog.List() {
		if t.Plugin == intrinsics.Plugin {
			its = append(its, t)
		}
	}
	return skills.Assemble(dir, ps, skills.IntrinsicsFrom(its))
}

// memoryBrief asks the healthy plugin with the memory_brief hook for group's
// brief, within BriefTimeout. With no such plugin the agent is told
// nothing about memory; when the hook fails or is late, the session starts
// without the brief (logged, audited) and CLAUDE.md tells the agent to
// load it with the memory_brief tool.
func (r *Runner) memoryBrief(ctx context.Context, session, group string) (claudemd.Memory, *plugin.Brief) {
	source, bp := r.opts.Plugins.BriefProvider()
	if bp == nil {
		return claudemd.NoMemory, nil
	}
	timeout := r.opts.BriefTimeout
	if timeout <= 0 {
		timeout = BriefTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	began := time.Now()
	b, err := callBrief(ctx, bp, group)
	took := time.Since(began)
	entry := &audit.Entry{Source: source, Session: session, Group: group, Stage: audit.StageBrief, DurationMS: float64(took.Microseconds()) / 1000}
	if err != nil {
		reason := "the memory brief failed: " + textutil.OneLine(err.Error())
		if errors.Is(err, context.DeadlineExceeded) {
			reason = fmt.Sprintf("the memory brief did not arrive within %s", timeout)
		}
		r.log.Warn("session starts without the memory brief", "plugin", source, "session", session, "group", group, "err", reason)
		entry.Outcome, entry.Code, entry.Reason = audit.OutcomeError, "BRIEF_UNAVAILABLE", textutil.Clip(reason, 4000)
		_ = r.audit.Write(entry)
		return claudemd.MemoryUnavailable, nil
	}
	ids := make([]string, 0, len(b.Entries))
	for _, e := range b.Entries {
		ids = append(ids, textutil.OneLine(e.ID))
	}
	// The ids say which memories each session was shown: when one turns
	// out to be poisoned, the audit log tells which sessions read it.
	entry.Outcome = audit.OutcomeOK
	entry.Reason = fmt.Sprintf("%d of %d memories", len(b.Entries), b.EntryCount)
	if len(ids) > 0 {
		entry.Reason = textutil.Clip(entry.Reason+": "+strings.Join(ids, " "), 4000)
	}
	_ = r.audit.Write(entry)
	r.log.Debug("memory brief", "plugin", source, "session", session, "entries", len(b.Entries), "took", took.Round(time.Microsecond))
	return claudemd.MemoryLoaded, b
}

// callBrief runs the hook on its own goroutine, so that neither a handler
// that ignores ctx nor one that panics (built-ins run in the core's
// process) can hold up or crash the session's start.
func callBrief(ctx context.Context, bp plugin.BriefProvider, group string) (*plugin.Brief, error) {
	type result struct {
		b   *plugin.Brief
		err error
	}
	done := make(chan result, 1)
	go func() {
		defer func() {
			if r := recover(); r != nil {
				done <- result{err: fmt.Errorf("the memory brief hook panicked: %v", r)}
			}
		}()
		b, err := bp.MemoryBrief(ctx, group)
		if err == nil && b == nil {
			err = errors.New("the memory brief hook returned no brief")
		}
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// removeAgent deletes a session's agent folder.
func (r *Runner) removeAgent(session string) {
	if err := skills.Remove(r.agentDir(session)); err != nil && !os.IsNotExist(err) {
		r.log.Warn("could not remove a session's agent folder", "session", session, "err", err)
	}
}

// clearAgents removes every session's agent folder: at start (left by a
// core that crashed) and at shutdown.
func (r *Runner) clearAgents() {
	entries, _ := os.ReadDir(r.agentRoot())
	for _, e := range entries {
		r.removeAgent(e.Name())
	}
}
