package activities

import (
	"encoding/json"

	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// MaxRouteNameBytes bounds the provider and the model name a LogScan
// carries in Route: a request/context naming a longer one is not taken as
// the session's route (its name would otherwise travel through workflow
// history).
const MaxRouteNameBytes = 1024

// Route is a model route a log records: the provider and the model of its
// last request/context event (the published harness writes one before its
// model calls; docs/FORMAT.md §1.2).
type Route struct {
	// Provider names the model provider, as the writer registered it.
	Provider string `json:"provider"`
	// Model names the provider's model.
	Model string `json:"model"`
}

// routeFold keeps the route of the last request/context event whose
// provider and model are non-empty strings of at most MaxRouteNameBytes,
// over the whole log (an inherited prefix included, as the harness's own
// requestContext fold reads it). Any other request/context is passed over:
// the payload is the writer's, and a log holding a malformed one still
// resumes, with the route it recorded before.
type routeFold struct {
	last *Route
}

func (f *routeFold) observe(e session.Event) {
	if e.Type != wire.TypeRequestContext {
		return
	}
	var r struct {
		Provider *string `json:"provider"`
		Model    *string `json:"model"`
	}
	if json.Unmarshal(e.Data, &r) != nil || r.Provider == nil || r.Model == nil {
		return
	}
	p, m := *r.Provider, *r.Model
	if p == "" || m == "" || len(p) > MaxRouteNameBytes || len(m) > MaxRouteNameBytes {
		return
	}
	f.last = &Route{Provider: p, Model: m}
}
