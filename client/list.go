package client

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/converter"

	"github.com/sessionflow/sessionflow/wire"
)

// Where List found a session's id, phase and cwd.
const (
	// SourceSearchAttributes: the workflow's search attributes.
	SourceSearchAttributes = "searchAttributes"
	// SourceDescribe: the workflow id, the Describe query (phase) and the
	// workflow's start input (cwd, when the input carries it).
	SourceDescribe = "describe"
)

// ListQuery is the visibility query of List: every running session
// workflow.
const ListQuery = "WorkflowType IN ('" + wire.CreateSessionName + "', '" + wire.ResumeSessionName + "', '" +
	wire.LiveSessionName + "') AND ExecutionStatus = 'Running'"

// describeTimeout bounds one Describe query of List's fallback, so that a
// session whose worker is away does not hold the listing.
const describeTimeout = 5 * time.Second

// listConcurrency bounds the concurrent lookups of List's fallback.
const listConcurrency = 8

// ListedSession is one running session in List.
type ListedSession struct {
	// SessionID is the session id.
	SessionID string `json:"sessionId"`
	// WorkflowID, RunID and WorkflowType name the running execution.
	WorkflowID   string `json:"workflowId"`
	RunID        string `json:"runId"`
	WorkflowType string `json:"workflowType"`
	// StartTime is when the run started (a continued-as-new run starts
	// when it continued).
	StartTime time.Time `json:"startTime"`
	// Phase is the lifecycle phase, empty when it could not be learned.
	Phase wire.Phase `json:"phase,omitempty"`
	// Cwd is the session's working directory, empty when it has none or it
	// could not be learned (a ResumeSession run without search attributes).
	Cwd string `json:"cwd,omitempty"`
	// Source says where SessionID, Phase and Cwd came from:
	// SourceSearchAttributes or SourceDescribe.
	Source string `json:"source"`
	// Error is why the phase is missing (a Describe query that failed).
	Error string `json:"error,omitempty"`
}

// List returns the running sessions, sorted by session id, through Temporal
// visibility (ListQuery; visibility is eventually consistent, so a session
// started or closed a moment ago may be missing or still listed). A session
// whose workflow carries the SessionId search attribute is read from its
// search attributes (SessionId, SessionPhase, SessionCwd); otherwise its id
// comes from the workflow id, its phase from the Describe query and its cwd
// from the workflow's start input (Source tells which). A failed describe
// leaves the phase empty and is reported in Error; only a failed listing
// fails List.
func (c *Client) List(ctx context.Context) ([]ListedSession, error) {
	var (
		out   []ListedSession
		token []byte
	)
	for {
		resp, err := c.c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: ListQuery, NextPageToken: token})
		if err != nil {
			return nil, fmt.Errorf("list running sessions: %w", err)
		}
		for _, info := range resp.GetExecutions() {
			out = append(out, listedFromInfo(info))
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			break
		}
	}
	c.completeListed(ctx, out)
	sort.SliceStable(out, func(i, j int) bool { return out[i].SessionID < out[j].SessionID })
	return out, nil
}

// listedFromInfo reads what a visibility record carries.
func listedFromInfo(info *workflowpb.WorkflowExecutionInfo) ListedSession {
	s := ListedSession{
		WorkflowID:   info.GetExecution().GetWorkflowId(),
		RunID:        info.GetExecution().GetRunId(),
		WorkflowType: info.GetType().GetName(),
		Source:       SourceDescribe,
	}
	if t := info.GetStartTime(); t != nil {
		s.StartTime = t.AsTime()
	}
	fields := info.GetSearchAttributes().GetIndexedFields()
	if id := keyword(fields, wire.SearchAttributeSessionID); id != "" {
		s.SessionID = id
		s.Phase = wire.Phase(keyword(fields, wire.SearchAttributeSessionPhase))
		s.Cwd = keyword(fields, wire.SearchAttributeSessionCwd)
		s.Source = SourceSearchAttributes
		return s
	}
	id, err := wire.SessionIDFromWorkflowID(s.WorkflowID)
	if err != nil {
		// A session workflow started under a workflow id that no session id
		// encodes to (by a client that ignored the contract): show the id
		// as it stands and say why.
		s.SessionID = strings.TrimPrefix(s.WorkflowID, wire.SessionWorkflowIDPrefix)
		s.Error = err.Error()
		return s
	}
	s.SessionID = id
	return s
}

// keyword decodes a Keyword search attribute, "" when absent or not a
// string.
func keyword(fields map[string]*commonpb.Payload, name string) string {
	p, ok := fields[name]
	if !ok || p == nil {
		return ""
	}
	var v string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &v); err != nil {
		return ""
	}
	return v
}

// completeListed fills the phase and cwd of the sessions listed without
// search attributes, concurrently.
func (c *Client) completeListed(ctx context.Context, out []ListedSession) {
	sem := make(chan struct{}, listConcurrency)
	var wg sync.WaitGroup
	for i := range out {
		if out[i].Source != SourceDescribe {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(s *ListedSession) {
			defer func() { <-sem; wg.Done() }()
			qctx, cancel := context.WithTimeout(ctx, describeTimeout)
			defer cancel()
			v, err := c.c.QueryWorkflow(qctx, s.WorkflowID, s.RunID, wire.QueryDescribe)
			var d wire.Description
			if err == nil {
				err = v.Get(&d)
			}
			if err != nil {
				s.Error = fmt.Sprintf("describe: %v", err)
			} else {
				s.Phase = d.Phase
				if d.SessionID != "" {
					s.SessionID = d.SessionID
				}
			}
			s.Cwd = c.startCwd(ctx, s.WorkflowID, s.RunID, s.WorkflowType)
		}(&out[i])
	}
	wg.Wait()
}

// startCwd reads the cwd from a run's start input: the meta of a
// CreateSession request or the header of a LiveSession state. It returns ""
// when the input has none or cannot be read.
func (c *Client) startCwd(ctx context.Context, workflowID, runID, workflowType string) string {
	if workflowType != wire.CreateSessionName && workflowType != wire.LiveSessionName {
		return ""
	}
	it := c.c.GetWorkflowHistory(ctx, workflowID, runID, false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if !it.HasNext() {
		return ""
	}
	ev, err := it.Next()
	if err != nil {
		return ""
	}
	input := ev.GetWorkflowExecutionStartedEventAttributes().GetInput()
	if input == nil {
		return ""
	}
	dc := converter.GetDefaultDataConverter()
	if workflowType == wire.CreateSessionName {
		var req wire.CreateSessionRequest
		if dc.FromPayloads(input, &req) != nil || req.Meta == nil {
			return ""
		}
		return req.Meta.Cwd
	}
	var st wire.LiveStateHeader
	if dc.FromPayloads(input, &st) != nil {
		return ""
	}
	return st.Header.Cwd
}
