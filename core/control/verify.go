package control

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/carapace-dev/carapace/core/api"
)

// A running plugin's own check of its setup over the control API:
//
//	POST /v1/plugins/{name}/verify    PluginCheck
//
// carapace doctor --online asks it of every serving plugin. The check may
// reach the network (the calendar plugin logs in to its server), which is
// why doctor asks only with --online.

// VerifyBackend is what a Backend implements to run a plugin's own check
// (plugin.Verifier). Errors wrap api.ErrNotFound (no such plugin) or
// api.ErrConflict (it is not serving).
type VerifyBackend interface {
	VerifyPlugin(ctx context.Context, name string) (api.PluginCheck, error)
}

func (s *Server) handleVerifyPlugin(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !pluginNameRE.MatchString(name) {
		s.writeError(w, r, fmt.Errorf("plugin name %q: names are kebab-case (a-z, 0-9, single dashes): %w", clipName(name), api.ErrInvalid))
		return
	}
	vb, ok := s.b.(VerifyBackend)
	if !ok {
		s.writeError(w, r, fmt.Errorf("%w: this core cannot run plugins' checks", api.ErrNotFound))
		return
	}
	pc, err := vb.VerifyPlugin(r.Context(), name)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, pc)
}

// VerifyPlugin asks running plugin name to check its own setup. A plugin
// without a check answers Checked false.
func (c *Client) VerifyPlugin(ctx context.Context, name string) (api.PluginCheck, error) {
	var pc api.PluginCheck
	err := c.do(ctx, http.MethodPost, "/v1/plugins/"+url.PathEscape(name)+"/verify", nil, &pc)
	return pc, err
}
