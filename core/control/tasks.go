package control

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"

	"github.com/carapace-dev/carapace/core/api"
)

// Scheduled tasks (core/tasks) over the control API:
//
//	GET    /v1/tasks                  every live task, with its next fire and newest run; ?all=1: the removed ones too
//	POST   /v1/tasks                  TaskRequest → the new Task, with its next three fires
//	GET    /v1/tasks/{id}             → the Task, live or removed
//	POST   /v1/tasks/{id}/pause       → the Task
//	POST   /v1/tasks/{id}/resume      → the Task
//	POST   /v1/tasks/{id}/run         run it once now → the TaskRun
//	DELETE /v1/tasks/{id}             remove it: it fires no more, and is kept with its runs → 204;
//	                                  ?purge=1: delete it and its runs for good
//	GET    /v1/tasks/{id}/history     ?limit=N (default 50, at most 1000) → []TaskRun, newest first
//
// The types are core/api's. A Backend serves them by also implementing
// TaskBackend.

// TaskBackend is what a Backend implements to serve the scheduled tasks.
// Errors wrap api.ErrNotFound (no such task), api.ErrInvalid (a bad task) or
// api.ErrConflict (a run still works, or the task was removed).
type TaskBackend interface {
	Tasks(ctx context.Context) ([]api.Task, error) // the live ones
	AddTask(ctx context.Context, req api.TaskRequest) (api.Task, error)
	PauseTask(ctx context.Context, id string) (api.Task, error)
	ResumeTask(ctx context.Context, id string) (api.Task, error)
	RunTask(ctx context.Context, id string) (api.TaskRun, error)
	// RemoveTask removes a task for the user: it fires no more and is
	// kept, with its runs.
	RemoveTask(ctx context.Context, id string) error
	TaskHistory(ctx context.Context, id string, limit int) ([]api.TaskRun, error)
	AllTasks(ctx context.Context) ([]api.Task, error) // live and removed
	Task(ctx context.Context, id string) (api.Task, error)
	// PurgeTask deletes a task, live or removed, and its runs for good.
	PurgeTask(ctx context.Context, id string) error
}

var taskIDRE = regexp.MustCompile(`^t-[a-z0-9]{1,32}$`)

func (s *Server) registerTasks(mux *http.ServeMux) {
	mux.HandleFunc("GET /v1/tasks", func(w http.ResponseWriter, r *http.Request) {
		all, err := queryFlag(r, "all")
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.withTasks(w, r, func(tb TaskBackend) (any, error) {
			if all {
				return tb.AllTasks(r.Context())
			}
			return tb.Tasks(r.Context())
		})
	})
	mux.HandleFunc("GET /v1/tasks/{id}", func(w http.ResponseWriter, r *http.Request) {
		s.withTask(w, r, func(tb TaskBackend, id string) (any, error) { return tb.Task(r.Context(), id) })
	})
	mux.HandleFunc("POST /v1/tasks", func(w http.ResponseWriter, r *http.Request) {
		var req api.TaskRequest
		if err := decodeBody(w, r, &req); err != nil {
			s.writeError(w, r, err)
			return
		}
		s.withTasks(w, r, func(tb TaskBackend) (any, error) { return tb.AddTask(r.Context(), req) })
	})
	for action, f := range map[string]func(TaskBackend, context.Context, string) (any, error){
		"pause":  func(tb TaskBackend, ctx context.Context, id string) (any, error) { return tb.PauseTask(ctx, id) },
		"resume": func(tb TaskBackend, ctx context.Context, id string) (any, error) { return tb.ResumeTask(ctx, id) },
		"run":    func(tb TaskBackend, ctx context.Context, id string) (any, error) { return tb.RunTask(ctx, id) },
	} {
		mux.HandleFunc("POST /v1/tasks/{id}/"+action, func(w http.ResponseWriter, r *http.Request) {
			s.withTask(w, r, func(tb TaskBackend, id string) (any, error) { return f(tb, r.Context(), id) })
		})
	}
	mux.HandleFunc("DELETE /v1/tasks/{id}", func(w http.ResponseWriter, r *http.Request) {
		purge, err := queryFlag(r, "purge")
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		s.withTask(w, r, func(tb TaskBackend, id string) (any, error) {
			if purge {
				return nil, tb.PurgeTask(r.Context(), id)
			}
			return nil, tb.RemoveTask(r.Context(), id)
		})
	})
	mux.HandleFunc("GET /v1/tasks/{id}/history", func(w http.ResponseWriter, r *http.Request) {
		limit := 50
		if v := r.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > api.MaxTaskHistory {
				s.writeError(w, r, fmt.Errorf("%w: limit %q: a number from 1 to %d", api.ErrInvalid, clipName(v), api.MaxTaskHistory))
				return
			}
			limit = n
		}
		s.withTask(w, r, func(tb TaskBackend, id string) (any, error) { return tb.TaskHistory(r.Context(), id, limit) })
	})
}

// queryFlag reads the query parameter name: absent, "0" or "1".
func queryFlag(r *http.Request, name string) (bool, error) {
	switch v := r.URL.Query().Get(name); v {
	case "", "0":
		return false, nil
	case "1":
		return true, nil
	default:
		return false, fmt.Errorf("%w: %s=%q: use %s=1", api.ErrInvalid, name, clipName(v), name)
	}
}

// withTasks answers with f's result, or 404 when the core has no scheduler.
func (s *Server) withTasks(w http.ResponseWriter, r *http.Request, f func(TaskBackend) (any, error)) {
	tb, ok := s.b.(TaskBackend)
	if !ok {
		s.writeError(w, r, fmt.Errorf("%w: this core has no scheduled tasks", api.ErrNotFound))
		return
	}
	v, err := f(tb)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if v == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// withTask is withTasks for a request naming a task, whose id it checks.
func (s *Server) withTask(w http.ResponseWriter, r *http.Request, f func(TaskBackend, string) (any, error)) {
	id := r.PathValue("id")
	if !taskIDRE.MatchString(id) {
		s.writeError(w, r, fmt.Errorf("%w: task id %q: ids look like t-ab12cd34 (carapace tasks list)", api.ErrInvalid, clipName(id)))
		return
	}
	s.withTasks(w, r, func(tb TaskBackend) (any, error) { return f(tb, id) })
}

// Tasks lists every live task.
func (c *Client) Tasks(ctx context.Context) ([]api.Task, error) {
	var out []api.Task
	err := c.do(ctx, http.MethodGet, "/v1/tasks", nil, &out)
	return out, err
}

// AllTasks lists every task, the removed ones too.
func (c *Client) AllTasks(ctx context.Context) ([]api.Task, error) {
	var out []api.Task
	err := c.do(ctx, http.MethodGet, "/v1/tasks?all=1", nil, &out)
	return out, err
}

// Task returns task id, live or removed.
func (c *Client) Task(ctx context.Context, id string) (api.Task, error) {
	var out api.Task
	err := c.do(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id), nil, &out)
	return out, err
}

// PurgeTask deletes task id and its runs for good.
func (c *Client) PurgeTask(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/tasks/"+url.PathEscape(id)+"?purge=1", nil, nil)
}

// AddTask creates a task.
func (c *Client) AddTask(ctx context.Context, req api.TaskRequest) (api.Task, error) {
	var out api.Task
	err := c.do(ctx, http.MethodPost, "/v1/tasks", req, &out)
	return out, err
}

// PauseTask stops task id from firing.
func (c *Client) PauseTask(ctx context.Context, id string) (api.Task, error) {
	var out api.Task
	err := c.do(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(id)+"/pause", nil, &out)
	return out, err
}

// ResumeTask starts task id again, from now.
func (c *Client) ResumeTask(ctx context.Context, id string) (api.Task, error) {
	var out api.Task
	err := c.do(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(id)+"/resume", nil, &out)
	return out, err
}

// RunTask runs task id once now, without shifting its schedule.
func (c *Client) RunTask(ctx context.Context, id string) (api.TaskRun, error) {
	var out api.TaskRun
	err := c.do(ctx, http.MethodPost, "/v1/tasks/"+url.PathEscape(id)+"/run", nil, &out)
	return out, err
}

// RemoveTask removes task id: it fires no more, and is kept with its runs.
func (c *Client) RemoveTask(ctx context.Context, id string) error {
	return c.do(ctx, http.MethodDelete, "/v1/tasks/"+url.PathEscape(id), nil, nil)
}

// TaskHistory returns task id's runs, newest first, at most limit.
func (c *Client) TaskHistory(ctx context.Context, id string, limit int) ([]api.TaskRun, error) {
	var out []api.TaskRun
	err := c.do(ctx, http.MethodGet, "/v1/tasks/"+url.PathEscape(id)+"/history?limit="+strconv.Itoa(limit), nil, &out)
	return out, err
}
