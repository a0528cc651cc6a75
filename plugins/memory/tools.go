package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/carapace-dev/carapace/core/claudemd"
	"github.com/carapace-dev/carapace/core/plugin"
	"github.com/carapace-dev/carapace/internal/textutil"
)

// Handler error codes besides the limits' (limits.go). The agent sees
// HANDLER_ERROR with the message; the code is kept in the audit log.
const (
	CodeInvalidArgument   = "INVALID_ARGUMENT"
	CodeNotFound          = "NOT_FOUND"
	CodeAlreadySuperseded = "ALREADY_SUPERSEDED"
)

// store is memory_store: it writes one entry with provenance from req.
func (h *Handler) store(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	args := req.Arguments
	typ, terr := stringArg(args, "type", true)
	if terr != nil {
		return nil, terr
	}
	if !slices.Contains(Types, typ) {
		return nil, invalid("type", "type must be one of preference, fact, instruction, context, correction.")
	}
	content, terr := stringArg(args, "content", true)
	if terr != nil {
		return nil, terr
	}
	tags, terr := stringsArg(args, "tags")
	if terr != nil {
		return nil, terr
	}
	sup, terr := stringArg(args, "supersedes", false)
	if terr != nil {
		return nil, terr
	}

	ops := []op{opStore}
	if sup != "" {
		ops = append(ops, opSupersede)
	}
	release, err := h.limits.reserve(req.Session, ops...)
	if err != nil {
		return nil, err
	}
	done := false
	defer func() {
		if !done {
			release()
		}
	}()

	// A store that supersedes needs an existing database: do not create
	// an empty one only to refuse the call.
	db, err := h.db(ctx, req.Group, sup == "")
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, notFound("supersedes", sup)
	}
	e, err := db.Put(ctx, NewEntry{
		Type: typ, Content: content, Tags: tags, Supersedes: sup,
		Session: req.Session, Group: req.Group, Time: h.reqTime(req),
	})
	if err != nil {
		if sup == "" {
			return nil, h.storeError(err, "", "")
		}
		return nil, h.storeError(err, "supersedes", sup)
	}
	done = true
	res := map[string]any{
		"id":          e.ID,
		"type":        e.Type,
		"behavioral":  e.Behavioral,
		"created_at":  formatTime(e.Created),
		"stores_left": h.limits.left(req.Session, opStore),
	}
	if sup != "" {
		res["supersedes"] = sup
	}
	return res, nil
}

// search is memory_search.
func (h *Handler) search(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	args := req.Arguments
	var q Query
	var terr *plugin.ToolError
	if q.Text, terr = stringArg(args, "query", false); terr != nil {
		return nil, terr
	}
	if q.Tags, terr = stringsArg(args, "tags"); terr != nil {
		return nil, terr
	}
	if q.Type, terr = stringArg(args, "type", false); terr != nil {
		return nil, terr
	}
	if q.Type != "" && !slices.Contains(Types, q.Type) {
		return nil, invalid("type", "type must be one of preference, fact, instruction, context, correction.")
	}
	if q.IncludeSuperseded, terr = boolArg(args, "include_superseded"); terr != nil {
		return nil, terr
	}
	if q.Limit, terr = limitArg(args, "limit"); terr != nil {
		return nil, terr
	}

	results := []any{}
	db, err := h.db(ctx, req.Group, false)
	if err != nil {
		return nil, err
	}
	if db != nil {
		hits, err := db.Search(ctx, q)
		if err != nil {
			return nil, h.storeError(err, "", "")
		}
		for _, hit := range hits {
			r := map[string]any{
				"id":              hit.ID,
				"type":            hit.Type,
				"content":         hit.Content,
				"behavioral":      hit.Behavioral || Behavioral(hit.Type),
				"tags":            nonNil(hit.Tags),
				"created_at":      formatTime(hit.Created),
				"relevance_score": hit.Relevance,
				"session_id":      hit.Session,
			}
			if hit.SupersededBy != "" {
				r["superseded_by"] = hit.SupersededBy
			}
			results = append(results, r)
		}
	}
	return map[string]any{"results": results, "count": len(results)}, nil
}

// briefTool is memory_brief: the brief the session started with, as it
// stands now.
func (h *Handler) briefTool(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	prov, terr := boolArg(req.Arguments, "include_provenance")
	if terr != nil {
		return nil, terr
	}
	now := h.reqTime(req)
	b, entries, err := h.brief(ctx, req.Group, now)
	if err != nil {
		return nil, err
	}
	res := map[string]any{
		"markdown":     claudemd.Brief(b),
		"entry_count":  b.EntryCount,
		"brief_count":  b.BriefCount,
		"generated_at": formatTime(b.GeneratedAt),
	}
	if prov {
		list := make([]any, 0, len(b.Entries))
		for i, be := range b.Entries {
			list = append(list, map[string]any{
				"id":         be.ID,
				"type":       be.Type,
				"content":    be.Content,
				"behavioral": be.Behavioral,
				"tags":       nonNil(be.Tags),
				"age_days":   be.AgeDays,
				"created_at": formatTime(entries[i].Created),
				"session_id": entries[i].Session,
			})
		}
		res["entries"] = list
	}
	return res, nil
}

// delete is memory_delete.
func (h *Handler) delete(ctx context.Context, req *plugin.Request) (map[string]any, error) {
	id, terr := stringArg(req.Arguments, "id", true)
	if terr != nil {
		return nil, terr
	}
	release, err := h.limits.reserve(req.Session, opDelete)
	if err != nil {
		return nil, err
	}
	done := false
	defer func() {
		if !done {
			release()
		}
	}()
	db, err := h.db(ctx, req.Group, false)
	if err != nil {
		return nil, err
	}
	if db == nil {
		return nil, notFound("id", id)
	}
	restored, err := db.Delete(ctx, id)
	if err != nil {
		return nil, h.storeError(err, "id", id)
	}
	done = true
	return map[string]any{"deleted": id, "restored": nonNil(restored)}, nil
}

// storeError turns an error of the store into what the agent should read:
// a *plugin.ToolError for what the agent can fix, the error itself
// (wrapped; the core reports PLUGIN_ERROR and audits it) for anything else.
// idField and id name the argument holding the entry id of the call.
func (h *Handler) storeError(err error, idField, id string) error {
	var inv *InvalidError
	var sup *SupersededError
	switch {
	case errors.As(err, &sup):
		return &plugin.ToolError{Code: CodeAlreadySuperseded, Field: idField,
			Message: fmt.Sprintf("Entry %s was already superseded by %s; supersede %s instead (memory_search with include_superseded shows the chain).",
				showID(sup.ID), showID(sup.By), showID(sup.By))}
	case errors.Is(err, ErrNotFound) && idField != "":
		return notFound(idField, id)
	case errors.As(err, &inv):
		return invalid(inv.Field, invalidMessage(inv))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("memory: %w", err)
	}
	return fmt.Errorf("memory store: %w", err)
}

// notFound is the refusal of an id this group has no entry for. It reads the
// same whether the id is unknown or another group's: groups do not learn of
// each other's entries.
func notFound(field, id string) *plugin.ToolError {
	return &plugin.ToolError{Code: CodeNotFound, Field: field,
		Message: fmt.Sprintf("No memory entry %s in this group; find the entry's id with memory_search.", showID(id))}
}

// invalidMessage words the store's refusal of an argument for the agent.
// The store's reasons are phrases written for this ("is empty", "tag 3 is
// 51 characters long; at most 50 are allowed"), never an internal error.
func invalidMessage(inv *InvalidError) string {
	reason := strings.TrimSuffix(strings.TrimSpace(inv.Reason), ".")
	for _, verb := range []string{"is ", "must ", "contains ", "has "} {
		if strings.HasPrefix(reason, verb) {
			return fmt.Sprintf("%s %s. Correct it and call the tool again.", inv.Field, reason)
		}
	}
	return fmt.Sprintf("Invalid %s: %s. Correct it and call the tool again.", inv.Field, reason)
}

func invalid(field, msg string) *plugin.ToolError {
	return &plugin.ToolError{Code: CodeInvalidArgument, Field: field, Message: msg}
}

// stringArg returns the string argument key; a required one must be there.
// The core has validated the arguments against the schema, but a handler
// checks the types it relies on all the same.
func stringArg(args map[string]any, key string, required bool) (string, *plugin.ToolError) {
	v, ok := args[key]
	if !ok || v == nil {
		if required {
			return "", invalid(key, fmt.Sprintf("%s is required.", key))
		}
		return "", nil
	}
	s, ok := v.(string)
	if !ok {
		return "", invalid(key, fmt.Sprintf("%s must be a string.", key))
	}
	if required && strings.TrimSpace(s) == "" {
		return "", invalid(key, fmt.Sprintf("%s must not be empty.", key))
	}
	return s, nil
}

// stringsArg returns the array-of-strings argument key, nil if absent.
func stringsArg(args map[string]any, key string) ([]string, *plugin.ToolError) {
	v, ok := args[key]
	if !ok || v == nil {
		return nil, nil
	}
	var out []string
	switch x := v.(type) {
	case []any:
		out = make([]string, 0, len(x))
		for _, e := range x {
			s, ok := e.(string)
			if !ok {
				return nil, invalid(key, fmt.Sprintf("%s must be an array of strings.", key))
			}
			out = append(out, s)
		}
	case []string:
		out = slices.Clone(x)
	default:
		return nil, invalid(key, fmt.Sprintf("%s must be an array of strings.", key))
	}
	return out, nil
}

// boolArg returns the boolean argument key, false if absent.
func boolArg(args map[string]any, key string) (bool, *plugin.ToolError) {
	v, ok := args[key]
	if !ok || v == nil {
		return false, nil
	}
	b, ok := v.(bool)
	if !ok {
		return false, invalid(key, fmt.Sprintf("%s must be true or false.", key))
	}
	return b, nil
}

// limitArg returns the search limit, DefaultLimit if absent.
func limitArg(args map[string]any, key string) (int, *plugin.ToolError) {
	v, ok := args[key]
	if !ok || v == nil {
		return DefaultLimit, nil
	}
	n, ok := asInt(v)
	if !ok || n < 1 || n > MaxLimit {
		return 0, invalid(key, fmt.Sprintf("%s must be a whole number from 1 to %d.", key, MaxLimit))
	}
	return int(n), nil
}

// showID quotes an id for a message. Ids the agent sent are quoted and cut
// short, as they can hold anything.
func showID(id string) string {
	if strings.HasPrefix(id, "mem-") && len(id) <= 64 && !strings.ContainsFunc(id, func(r rune) bool {
		return !(r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z')
	}) {
		return id
	}
	return fmt.Sprintf("%q", textutil.ClipRunes(id, 64))
}

// formatTime renders a time as RFC 3339 in UTC.
func formatTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// nonNil returns s, or an empty slice for nil, so that JSON shows [].
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
