package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/sessionflow/sessionflow/activities"
	"github.com/sessionflow/sessionflow/session"
	"github.com/sessionflow/sessionflow/wire"
)

// createPlan is a validated create request.
type createPlan struct {
	header    wire.Header
	inherited int64
	// suffix is the inline seed plus its end-seed marker (nil without an
	// inline seed); fork is set instead for a fork.
	suffix []session.Event
	fork   *wire.ForkSeed
	// eventCount is the session's length once the seed is stored.
	eventCount int64
	// firstLiveSeq is the seed's length: the seq of its end-seed marker.
	firstLiveSeq int64
}

// planCreate validates a create request before any side effect
// (LIFECYCLE.md §2) and builds the header and the unstored suffix.
func planCreate(req CreateSessionRequest, set settings, now int64) (createPlan, error) {
	var p createPlan
	if err := wire.ValidateID(req.SessionID); err != nil {
		return p, invalidArgument(err.Error())
	}
	meta := wire.SessionMeta{}
	if req.Meta != nil {
		meta = *req.Meta
	}
	if req.Seed != nil && req.Fork != nil {
		return p, invalidArgument("seed and fork are mutually exclusive")
	}
	inherited := req.InheritedEventCount
	if req.Fork != nil {
		if err := wire.ValidateID(req.Fork.ParentSessionID); err != nil {
			return p, invalidArgument("fork parent: " + err.Error())
		}
		if req.Fork.Count < 0 || req.Fork.Count > wire.MaxSafeInteger {
			return p, invalidArgument("fork count must be a non-negative safe integer")
		}
		meta.IsSeeded = true
		if meta.ParentSession == "" {
			meta.ParentSession = req.Fork.ParentSessionID
		}
		if inherited == 0 {
			inherited = req.Fork.Count
		}
		if inherited != req.Fork.Count {
			return p, invalidArgument("inheritedEventCount must equal the fork count")
		}
	}
	createdAt := now
	if meta.CreatedAt != nil {
		createdAt = *meta.CreatedAt
	}
	p.header = wire.Header{
		Version:         wire.FormatVersion,
		ID:              req.SessionID,
		CreatedAt:       createdAt,
		Cwd:             meta.Cwd,
		ParentSession:   meta.ParentSession,
		IsSeeded:        meta.IsSeeded,
		Origin:          meta.Origin,
		DelegationDepth: meta.DelegationDepth,
		AgentPreset:     meta.AgentPreset,
	}
	if err := p.header.Validate(); err != nil {
		return p, invalidArgument(err.Error())
	}
	if inherited != 0 && !p.header.IsSeeded {
		return p, invalidArgument(unseededInheritedText(inherited))
	}
	count := inherited
	if p.header.IsSeeded && count == 0 {
		count = -1
	}
	if err := p.header.ValidateInheritedCount(count); err != nil {
		return p, invalidArgument(err.Error())
	}
	p.inherited = inherited
	switch {
	case req.Fork != nil:
		p.fork = req.Fork
		p.eventCount = req.Fork.Count + 1
		p.firstLiveSeq = req.Fork.Count
	case req.Seed != nil:
		if _, err := session.SnapshotBatch(req.Seed); err != nil {
			return p, invalidArgument(err.Error())
		}
		if err := session.CheckContiguous(req.SessionID, 0, req.Seed); err != nil {
			return p, invalidArgument(err.Error())
		}
		if p.header.IsSeeded && inherited != int64(len(req.Seed)) {
			return p, invalidArgument("inheritedEventCount must equal the seed length of a seeded session")
		}
		seed := session.CloneEvents(req.Seed)
		marker, due := session.EndSeedMarker(seed, p.header.IsSeeded, session.EndSeedTime(seed, now))
		p.suffix = seed
		if due {
			p.suffix = append(p.suffix, marker)
		}
		if err := session.ValidateInheritedMarker(p.header, p.suffix); err != nil {
			return p, invalidArgument(err.Error())
		}
		n, err := batchBytes(p.suffix)
		if err != nil {
			return p, invalidArgument(err.Error())
		}
		if n > set.maxBatchBytes {
			return p, invalidArgument("inline seed exceeds the batch limit; fork from a stored session instead")
		}
		p.eventCount = int64(len(p.suffix))
		p.firstLiveSeq = int64(len(seed))
	case p.header.IsSeeded:
		return p, invalidArgument(session.ErrSeededLacksMarker.Error())
	}
	return p, nil
}

// CreateSession is the create of LIFECYCLE.md §4 as a workflow, run with
// workflow id session/<id>: it validates the request, creates the stored
// session under a write handle whose id it chose, validates the agent
// options, runs the setup and commit hooks, stores the seed at the commit
// point, publishes the lifecycle entries and stays live until disposal.
// Any failure before live rolls back (the handle is closed, nothing is
// published) and is returned unchanged; WaitReady returns it at once.
func CreateSession(ctx workflow.Context, req CreateSessionRequest) (wire.DisposeResult, error) {
	set, optErr := resolveOptions(req.Options)
	l := newLifecycle(ctx, req.SessionID, wire.SourceStartup, req.Hooks, req.Options, set)
	if err := l.register(); err != nil {
		return wire.DisposeResult{}, err
	}
	return l.start(func() error {
		if optErr != nil {
			return optErr
		}
		return l.prepareCreate(ctx, req, set)
	})
}

// prepareCreate is CreateSession before the live phase (LIFECYCLE.md §4
// steps 1-5); start rolls back every failure it returns.
func (l *lifecycle) prepareCreate(ctx workflow.Context, req CreateSessionRequest, set settings) error {
	now := workflow.Now(ctx).UnixMilli()
	req, point, err := l.resolveFork(ctx, req)
	if err != nil {
		return err
	}
	plan, err := planCreate(req, set, now)
	if err != nil {
		return err
	}
	if err := checkIdentity(ctx, req.SessionID); err != nil {
		return err
	}
	if err := session.CheckAppendable(plan.header, 0, plan.suffix); err != nil {
		// Versioned only where it matters: a run whose seed the store
		// would refuse now fails here, before any side effect.
		if workflow.GetVersion(ctx, seedRulesChange, workflow.DefaultVersion, 1) >= 1 {
			return invalidArgument(err.Error())
		}
	}
	if err := l.aborts.check(); err != nil {
		return err
	}
	// Step 2: the stored session, under a handle id chosen here.
	ref := l.chooseHandle()
	var hi activities.HandleInfo
	err = l.aborts.race(func(c workflow.Context) workflow.Future {
		return workflow.ExecuteActivity(l.act(l.set.storeCtx(c), "create the session's write handle"), acts.CreateHandle, activities.CreateHandleInput{
			Header:              plan.header,
			HandleID:            ref.HandleID,
			Owner:               l.owner(),
			InheritedEventCount: plan.inherited,
		})
	}, &hi)
	if err != nil {
		return err
	}
	l.log.opened(hi.Header, plan.inherited, hi.NextSeq)
	// Step 3: agent options, after the handle exists.
	if err := validateAgentOptions(req.AgentOptions); err != nil {
		return err
	}
	opts, logged := forkOptions(req.AgentOptions, point)
	if err := l.agent.setOptions(opts, logged, hi.PermissionDefaults); err != nil {
		return err
	}
	if req.Subagent != nil {
		if err := l.agent.delegation(req.Subagent); err != nil {
			return err
		}
	}
	if err := l.aborts.check(); err != nil {
		return err
	}
	l.saga.pushDisposeHook()
	eventCount := plan.eventCount
	l.log.planned(plan.firstLiveSeq, session.LastTurn(plan.suffix))
	// Step 4: setup, commit, the commit point, publication.
	return l.initialize(eventCount, func(extra []session.Event) error {
		if plan.fork != nil {
			var res activities.SeedResult
			sum := fmt.Sprintf("fork: copy %d events of %s", plan.fork.Count, wire.SummaryName(plan.fork.ParentSessionID))
			err := workflow.ExecuteActivity(l.act(l.set.storeCtx(l.dctx), sum), acts.StoreSeed, activities.StoreSeedInput{
				Ref:             *l.log.ref,
				ParentSessionID: plan.fork.ParentSessionID,
				Count:           plan.fork.Count,
				Now:             now,
				Events:          extra,
			}).Get(l.dctx, &res)
			if err != nil {
				return unwrapActivity(err)
			}
			l.log.seeded(res.NextSeq, res.LastTurn)
			return nil
		}
		batch := append(session.CloneEvents(plan.suffix), extra...)
		l.log.noteTurn(session.LastTurn(extra))
		return l.log.storeBatch(batch)
	})
}
