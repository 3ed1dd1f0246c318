package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sessionflow/sessionflow/client"
	"github.com/sessionflow/sessionflow/jsonl"
	"github.com/sessionflow/sessionflow/livetext"
	"github.com/sessionflow/sessionflow/wire"
)

// Control is what the server asks of Temporal: the session workflows'
// updates and queries. *client.Client implements it.
type Control interface {
	List(ctx context.Context) ([]client.ListedSession, error)
	Describe(ctx context.Context, id string) (wire.Description, error)
	LoopState(ctx context.Context, id string) (wire.LoopState, error)
	Followup(ctx context.Context, id string, req wire.InputRequest) (wire.InputResult, error)
	Steer(ctx context.Context, id string, req wire.InputRequest) (wire.InputResult, error)
	Inject(ctx context.Context, id string, req wire.InputRequest) (wire.InputResult, error)
	CancelTurn(ctx context.Context, id, cause string, keepInbox bool) (wire.CancelResult, error)
	PendingApprovals(ctx context.Context, id string) ([]wire.PendingApproval, error)
	Decide(ctx context.Context, id string, req wire.DecideRequest) (wire.DecideResult, error)
	SetPermissions(ctx context.Context, id string, req wire.SetPermissionsRequest) (wire.Permissions, error)
	Compact(ctx context.Context, id string, req wire.CompactRequest) (wire.CompactResult, error)
	Dispose(ctx context.Context, id string) (wire.DisposeResult, error)
}

var _ Control = (*client.Client)(nil)

// DefaultMaxStreams is the default bound of the streams a Server holds
// open at once (Options.MaxStreams). A web view holds two per open
// session page (its events and its live text) and a streaming client one
// or two, so 1024 admits 100 sessions streaming at once with several
// viewers each (the live text benchmark holds 100 live streams on a
// worker's server with the defaults). What it bounds is what clients can
// hold of the server: each stream takes a connection (a descriptor and
// its buffers) and a goroutine or two, a live stream also the followed
// live file's descriptor, an events stream one batch of events while it
// reads, so 1024 streams keep about 2,000 descriptors, within the
// descriptor limit of a Go process (which raises its soft limit to the
// hard one).
const DefaultMaxStreams = 1024

// Defaults of Options.
const (
	DefaultKeepAlive    = 15 * time.Second
	DefaultPollInterval = 100 * time.Millisecond
	DefaultCallTimeout  = 60 * time.Second
	DefaultReadBatch    = 256
	// DefaultQueryTimeout bounds the queries that only decorate a read
	// (a session's state and loop): a read of the store never waits
	// longer for Temporal.
	DefaultQueryTimeout = 5 * time.Second
)

// Options configure a Server.
type Options struct {
	// Store is the session store the sessions are read from (read only).
	Store *jsonl.Store
	// Control passes the control calls to Temporal; nil answers them 503.
	Control Control
	// Live follows the live text of the sessions' running model calls;
	// nil follows the store's live files (livetext.Source).
	Live LiveSource
	// Page, when set, serves every path outside /v1/: the web view
	// (package webui). Its files hold no session data, so they are served
	// without the token; the page asks for it and sends it with each API
	// request.
	Page http.Handler
	// Token, when set, is the bearer token every request must carry.
	Token string
	// MaxStreams bounds the event streams open at once; a stream past it
	// is refused with 503 TooManyStreams. Default DefaultMaxStreams.
	MaxStreams int
	// KeepAlive is the interval of the ": keep-alive" comments of an
	// event stream; default DefaultKeepAlive.
	KeepAlive time.Duration
	// PollInterval is how often a stream checks the log for new events;
	// default DefaultPollInterval.
	PollInterval time.Duration
	// ReadBatch bounds the events one read of a response or a stream
	// holds: a stream's memory is one batch of events besides the store's
	// read of the log. Default DefaultReadBatch.
	ReadBatch int
	// CallTimeout bounds one control call; default DefaultCallTimeout.
	CallTimeout time.Duration
	// QueryTimeout bounds the state queries of a read; default
	// DefaultQueryTimeout.
	QueryTimeout time.Duration
	// Logger logs failures of the server itself; default slog.Default().
	Logger *slog.Logger
}

// Server is the HTTP handler of the session API. It is safe for
// concurrent use. Close ends its open streams.
type Server struct {
	opts    Options
	mux     *http.ServeMux
	routes  []string
	streams chan struct{}
	stop    chan struct{}
	once    sync.Once
	tokenH  [32]byte
	sums    *summaryCache
}

// New returns the server of opts.
func New(opts Options) (*Server, error) {
	if opts.Store == nil {
		return nil, errors.New("httpapi: a store is required")
	}
	if opts.MaxStreams <= 0 {
		opts.MaxStreams = DefaultMaxStreams
	}
	if opts.KeepAlive <= 0 {
		opts.KeepAlive = DefaultKeepAlive
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.ReadBatch <= 0 {
		opts.ReadBatch = DefaultReadBatch
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.QueryTimeout <= 0 {
		opts.QueryTimeout = DefaultQueryTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Live == nil {
		opts.Live = livetext.Source{Store: opts.Store}
	}
	s := &Server{opts: opts, mux: http.NewServeMux(), streams: make(chan struct{}, opts.MaxStreams),
		stop: make(chan struct{}), sums: newSummaryCache(summaryCacheSize)}
	s.tokenH = sha256.Sum256([]byte(opts.Token))
	s.register()
	return s, nil
}

// route is one registered route.
type route struct {
	method, pattern string
	h               http.HandlerFunc
}

// register registers every route of the API, and under each pattern a
// handler answering other methods with a typed 405.
func (s *Server) register() {
	routes := []route{
		{"GET", "/v1/openapi.yaml", s.openAPI},
		{"GET", "/v1/sessions", s.listSessions},
		{"GET", "/v1/sessions/{id}", s.getSession},
		{"GET", "/v1/sessions/{id}/events", s.events},
		{"GET", "/v1/sessions/{id}/live", s.live},
		{"POST", "/v1/sessions/{id}/messages", s.messages},
		{"POST", "/v1/sessions/{id}/cancel", s.cancel},
		{"GET", "/v1/sessions/{id}/approvals", s.approvals},
		{"POST", "/v1/sessions/{id}/approvals/{approvalId}", s.decide},
		{"POST", "/v1/sessions/{id}/permissions", s.permissions},
		{"POST", "/v1/sessions/{id}/compact", s.compact},
		{"POST", "/v1/sessions/{id}/dispose", s.dispose},
	}
	methods := map[string][]string{}
	var order []string
	for _, r := range routes {
		s.mux.HandleFunc(r.method+" "+r.pattern, r.h)
		s.routes = append(s.routes, r.method+" "+r.pattern)
		if _, ok := methods[r.pattern]; !ok {
			order = append(order, r.pattern)
		}
		methods[r.pattern] = append(methods[r.pattern], r.method)
	}
	for _, p := range order {
		allow := strings.Join(methods[p], ", ")
		s.mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, TypeMethodNotAllowed, fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, p, allow), nil)
		})
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, TypeNoSuchRoute, "no route "+r.Method+" "+r.URL.EscapedPath(), nil)
	})
}

// Routes lists the registered routes as "METHOD /pattern", in
// registration order.
func (s *Server) Routes() []string { return append([]string(nil), s.routes...) }

// Close ends the server's open event streams; later streams end at once.
// It does not stop an http.Server (Serve does both).
func (s *Server) Close() { s.once.Do(func() { close(s.stop) }) }

// ServeHTTP authenticates the request, refuses a path that is not plain
// segments, and routes it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if s.opts.Page != nil && r.URL.Path != "/v1" && !strings.HasPrefix(r.URL.Path, "/v1/") {
		if s.opts.Token == "" && !loopbackHost(r.Host) {
			writeError(w, http.StatusForbidden, TypeForbidden, fmt.Sprintf("host %q is not a loopback name; this server has no token and answers loopback requests only", r.Host), nil)
			return
		}
		s.opts.Page.ServeHTTP(w, r)
		return
	}
	if s.opts.Token != "" {
		if !s.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="sessionflow"`)
			writeError(w, http.StatusUnauthorized, TypeUnauthorized, "a bearer token is required: send Authorization: Bearer <token>", nil)
			return
		}
	} else if !loopbackHost(r.Host) {
		// Without a token the server listens on loopback only; a request
		// naming another host is a DNS rebinding attempt.
		writeError(w, http.StatusForbidden, TypeForbidden, fmt.Sprintf("host %q is not a loopback name; this server has no token and answers loopback requests only", r.Host), nil)
		return
	}
	if o := r.Header.Get("Origin"); o != "" && !sameOrigin(o, r.Host) {
		writeError(w, http.StatusForbidden, TypeForbidden, fmt.Sprintf("cross-origin request from %q refused", o), nil)
		return
	}
	if err := checkPath(r.URL); err != nil {
		writeError(w, http.StatusBadRequest, wire.ErrTypeInvalidArgument, err.Error(), nil)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// authorized compares the request's bearer token with the server's in
// constant time (hashes of equal length, whatever the lengths given).
func (s *Server) authorized(r *http.Request) bool {
	v := r.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(v, "Bearer ")
	if !ok {
		return false
	}
	h := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(h[:], s.tokenH[:]) == 1
}

// loopbackHost reports whether the Host header names a loopback host.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameOrigin reports whether the Origin header names the request's host.
func sameOrigin(origin, host string) bool {
	u, err := url.Parse(origin)
	return err == nil && u.Host != "" && strings.EqualFold(u.Host, host)
}

// checkPath refuses a path that is not a run of plain segments: a "." or
// ".." segment (raw or percent-encoded), an empty segment, an escape that
// does not decode, or a control character.
func checkPath(u *url.URL) error {
	raw := u.EscapedPath()
	if !strings.HasPrefix(raw, "/") {
		return fmt.Errorf("path %q is not absolute", raw)
	}
	segs := strings.Split(raw[1:], "/")
	for i, seg := range segs {
		if seg == "" && i == len(segs)-1 && i > 0 {
			return fmt.Errorf("path %q ends with a slash", raw)
		}
		dec, err := url.PathUnescape(seg)
		if err != nil {
			return fmt.Errorf("path %q: %w", raw, err)
		}
		switch {
		case seg == "" && len(segs) > 1:
			return fmt.Errorf("path %q has an empty segment", raw)
		case dec == "." || dec == "..":
			return fmt.Errorf("path %q has a %q segment", raw, dec)
		case strings.IndexFunc(dec, unicode.IsControl) >= 0:
			return fmt.Errorf("path %q holds a control character", raw)
		}
	}
	return nil
}

// Error types the server raises itself, beside the workflows' (wire.ErrType*)
// and the client's (client.Type*).
const (
	// TypeNoSuchSession: the store holds no session of that id (404).
	TypeNoSuchSession = "NoSuchSession"
	// TypeNoSuchRoute: no route has that path (404).
	TypeNoSuchRoute = "NoSuchRoute"
	// TypeMethodNotAllowed: the route does not take that method (405).
	TypeMethodNotAllowed = "MethodNotAllowed"
	// TypeUnauthorized: the bearer token is missing or wrong (401).
	TypeUnauthorized = "Unauthorized"
	// TypeForbidden: a request naming a non-loopback host to a server
	// without a token, or a cross-origin request (403).
	TypeForbidden = "Forbidden"
	// TypeUnsupportedMediaType: a request body that is not JSON (415).
	TypeUnsupportedMediaType = "UnsupportedMediaType"
	// TypeTooManyStreams: the server's limit of open streams is reached
	// (503).
	TypeTooManyStreams = "TooManyStreams"
	// TypeUnavailable: Temporal (or a worker) did not answer (503).
	TypeUnavailable = "Unavailable"
	// TypeInternal: a failure of the server or the store (500).
	TypeInternal = "Internal"
)

// ErrorBody is the body of every error response.
type ErrorBody struct {
	Error ErrorInfo `json:"error"`
}

// ErrorInfo is a typed error.
type ErrorInfo struct {
	// Type is the class, e.g. "NoSuchSession", "TurnRunning".
	Type string `json:"type"`
	// Message is the reference text.
	Message string `json:"message"`
	// Details carry what the class adds (an ApprovalSettled's outcome, an
	// AggregateError's parts).
	Details map[string]any `json:"details,omitempty"`
}

// writeError writes a typed error.
func writeError(w http.ResponseWriter, status int, typ, msg string, details map[string]any) {
	writeJSON(w, status, ErrorBody{Error: ErrorInfo{Type: typ, Message: msg, Details: details}})
}

// writeJSON writes v as the JSON response, '<', '>' and '&' kept.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		b, _ = marshal(ErrorBody{Error: ErrorInfo{Type: TypeInternal, Message: "encode the response: " + err.Error()}})
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// marshal encodes v as one line of JSON without HTML escaping.
func marshal(v any) ([]byte, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return []byte(b.String()), nil
}

// statusOf maps an error type to its status.
func statusOf(typ string) int {
	switch typ {
	case wire.ErrTypeInvalidArgument, client.TypeInputTooLarge, wire.ErrTypeBatchTooLarge, wire.ErrTypeTypeError:
		return http.StatusBadRequest
	case TypeNoSuchSession, string(wire.CodeNotFound), wire.ErrTypeNoSuchApproval, wire.ErrTypeNoSuchTurn:
		return http.StatusNotFound
	case wire.ErrTypeInboxFull:
		return http.StatusTooManyRequests
	case TypeUnavailable, TypeTooManyStreams:
		return http.StatusServiceUnavailable
	case TypeInternal, wire.ErrTypeAggregate, wire.ErrTypeIO:
		return http.StatusInternalServerError
	}
	// The workflows' other refusals (TurnRunning, TurnLeftOpen,
	// ApprovalSettled, SessionNotLive, LifecycleDisposed, NoRoute,
	// WorkflowNotRunning, ...) are conflicts with the session's state.
	return http.StatusConflict
}

// sessionID reads and checks the {id} of the path: valid UTF-8, no
// control character, within the store's id length limit.
func sessionID(r *http.Request) (string, error) {
	return pathValue(r, "id", "session id")
}

// pathValue reads and checks a path value.
func pathValue(r *http.Request, name, what string) (string, error) {
	v := r.PathValue(name)
	switch {
	case v == "":
		return "", fmt.Errorf("the %s is empty", what)
	case !utf8.ValidString(v):
		return "", fmt.Errorf("the %s is not valid UTF-8", what)
	case strings.IndexFunc(v, unicode.IsControl) >= 0:
		return "", fmt.Errorf("the %s holds a control character", what)
	}
	if err := jsonl.CheckIDLength(v); err != nil {
		return "", fmt.Errorf("the %s: %w", what, err)
	}
	return v, nil
}
