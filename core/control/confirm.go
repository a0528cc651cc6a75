package control

import (
	"context"
	"net/http"
	"net/url"

	"github.com/carapace-dev/carapace/core/api"
)

func (s *Server) handleConfirmations(w http.ResponseWriter, r *http.Request) {
	list := s.b.Confirmations(r.Context(), r.URL.Query().Get("recent") == "1")
	if list == nil {
		list = []api.Confirmation{}
	}
	writeJSON(w, http.StatusOK, list)
}

// handleConfirmation answers one confirmation, by id or unique prefix;
// with raw=1, with its arguments and preview as they run (a pending one
// only).
func (s *Server) handleConfirmation(w http.ResponseWriter, r *http.Request) {
	c, err := api.FindConfirmation(s.b.Confirmations(r.Context(), true), r.PathValue("ref"))
	if err == nil && r.URL.Query().Get("raw") == "1" {
		if c, err = s.b.RawConfirmation(r.Context(), c.ID); err == nil {
			s.logger.Info("control: confirmation's arguments shown as they run", "confirmation", c.ID, "hidden", len(c.Hidden))
		}
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, c)
}

func (s *Server) handleApprove(w http.ResponseWriter, r *http.Request) { s.decide(w, r, true) }
func (s *Server) handleDeny(w http.ResponseWriter, r *http.Request)    { s.decide(w, r, false) }

func (s *Server) decide(w http.ResponseWriter, r *http.Request, approve bool) {
	var d api.Decision
	if err := decodeBody(w, r, &d); err != nil {
		s.writeError(w, r, err)
		return
	}
	d.ID, d.Approve = r.PathValue("id"), approve
	if err := d.Check(); err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := s.b.Decide(r.Context(), d)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.logger.Info("control: confirmation decided", "confirmation", c.ID, "decision", c.Decision, "surface", c.Surface)
	writeJSON(w, http.StatusOK, c)
}

// Confirmations lists the pending confirmations; with recent, also the
// resolved ones the core remembers.
func (c *Client) Confirmations(ctx context.Context, recent bool) ([]api.Confirmation, error) {
	var list []api.Confirmation
	path := "/v1/confirmations"
	if recent {
		path += "?recent=1"
	}
	err := c.do(ctx, http.MethodGet, path, nil, &list)
	return list, err
}

// Confirmation returns one confirmation, pending or recent, by id or by a
// unique prefix of at least six characters.
func (c *Client) Confirmation(ctx context.Context, ref string) (api.Confirmation, error) {
	var cf api.Confirmation
	err := c.do(ctx, http.MethodGet, "/v1/confirmations/"+url.PathEscape(ref), nil, &cf)
	return cf, err
}

// ConfirmationRaw returns one pending confirmation, like Confirmation,
// with its arguments exactly as they run (Raw), secrets included: for a
// person to read before approving one whose display hides something.
func (c *Client) ConfirmationRaw(ctx context.Context, ref string) (api.Confirmation, error) {
	var cf api.Confirmation
	err := c.do(ctx, http.MethodGet, "/v1/confirmations/"+url.PathEscape(ref)+"?raw=1", nil, &cf)
	return cf, err
}

// Decide sends one decision and returns the confirmation as it now stands.
// An error wrapping api.ErrConflict says it was already decided (its message
// says how) or that the hash is not the confirmation's.
func (c *Client) Decide(ctx context.Context, d api.Decision) (api.Confirmation, error) {
	verb := "deny"
	if d.Approve {
		verb = "approve"
	}
	var cf api.Confirmation
	err := c.do(ctx, http.MethodPost, "/v1/confirmations/"+url.PathEscape(d.ID)+"/"+verb, d, &cf)
	return cf, err
}
