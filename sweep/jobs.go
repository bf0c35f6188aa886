package sweep

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/launch"
	"flashstep/problem"
)

// Executor times sweep points on one engine.
type Executor interface {
	// Time measures point p: a warm-up, then repeats runs, on fresh inputs
	// drawn from seed. Running out of memory is a Result, not an error; an
	// error means the engine failed.
	Time(ctx context.Context, p Point, repeats int, seed uint64) (Result, error)
	// Source says what the times are of: a GPU and its driver, or the CPU.
	Source() string
}

// Job is one sweep, queued, running or over.
type Job struct {
	ID       string        `json:"id"`
	Spec     Spec          `json:"spec"`
	Query    string        `json:"query"`
	Source   string        `json:"source"`
	State    string        `json:"state"` // queued, running, done, cancelled, failed
	Ahead    int           `json:"ahead"` // sweeps before this one, while queued
	Done     int           `json:"done"`
	Total    int           `json:"total"`
	Estimate time.Duration `json:"estimate_ns"`
	Error    string        `json:"error,omitempty"`
	Results  []Result      `json:"results"`
	Created  time.Time     `json:"created"`
	Started  time.Time     `json:"started,omitzero"`
	Finished time.Time     `json:"finished,omitzero"`
	// Memory is, on the GPU, the free device memory before the sweep's first
	// point and after its last: a sweep, finished or cancelled, must leave
	// what it found.
	Memory *MemoryCheck `json:"memory,omitempty"`

	cancel context.CancelFunc
	owner  string // the address that asked for it
}

// newJobID names a sweep unguessably: whoever has the ID may follow or
// cancel it, so a stranger must not be able to count up to it.
func newJobID() string {
	b := make([]byte, 9)
	crand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// MemoryCheck compares free device memory before and after a sweep.
type MemoryCheck struct {
	FreeBefore int64 `json:"free_before"`
	FreeAfter  int64 `json:"free_after"`
}

// Job states.
const (
	StateQueued    = "queued"
	StateRunning   = "running"
	StateDone      = "done"
	StateCancelled = "cancelled"
	StateFailed    = "failed"
)

// Manager runs sweeps one at a time, in the order they came: two sweeps at
// once would time each other.
type Manager struct {
	execs map[instrument.Source]Executor

	mu    sync.Mutex
	jobs  map[string]*Job
	queue []*Job // waiting, in order
	kept  []*Job // every job, oldest first, for trimming
	wake  chan struct{}
	stop  chan struct{}
	done  chan struct{}

	closeOnce sync.Once
}

// keepJobs bounds how many finished sweeps the manager remembers.
const keepJobs = 32

// Admission: sweeps run one at a time, so the queue is the wait. A CPU
// sweep may take two minutes and a GPU one twenty: eight waiting is already
// hours of a GPU's time, and one address may have two sweeps queued or
// running (a teacher comparing two settings), no more.
const (
	MaxQueued   = 8
	MaxPerOwner = 2
)

// busy refuses a sweep the queue cannot take now (problem.Busy): a sweep's
// turn comes in about a minute.
func busy(format string, args ...any) error {
	return &problem.Error{Code: problem.Busy, Message: fmt.Sprintf(format, args...), RetryAfter: time.Minute}
}

// NewManager starts a manager over the engines it has: "cpu" always, "gpu"
// where there is one.
func NewManager(execs map[instrument.Source]Executor) *Manager {
	m := &Manager{execs: execs, jobs: map[string]*Job{}, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go m.loop()
	return m
}

// Engines says which engines can sweep here.
func (m *Manager) Engines() map[instrument.Source]string {
	out := map[instrument.Source]string{}
	for k, e := range m.execs {
		out[k] = e.Source()
	}
	return out
}

// Submit queues a sweep for owner (the client's address), or refuses it
// with a problem.Busy past MaxQueued waiting or MaxPerOwner of owner's.
func (m *Manager) Submit(s Spec, owner string) (Job, error) {
	ex, ok := m.execs[s.Engine]
	if !ok {
		return Job{}, kernels.FieldErrors{{Field: FieldEngine, Message: "this server has no GPU to sweep on: choose the CPU, or see the sweep recorded on an H100"}}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.queue) >= MaxQueued {
		return Job{}, busy("%d sweeps are waiting already, as many as this server queues: try again when one has run", len(m.queue))
	}
	mine := 0
	for _, j := range m.jobs {
		if j.owner == owner && (j.State == StateQueued || j.State == StateRunning) {
			mine++
		}
	}
	if mine >= MaxPerOwner {
		return Job{}, busy("your address has %d sweeps queued or running, the most one address may: wait for one, or cancel it", mine)
	}
	j := &Job{ID: newJobID(), owner: owner, Spec: s, Query: s.Values().Encode(), Source: ex.Source(), State: StateQueued,
		Total: len(s.Points()), Estimate: s.Estimate(), Created: time.Now(), Results: []Result{}}
	m.jobs[j.ID] = j
	m.queue = append(m.queue, j)
	m.kept = append(m.kept, j)
	for len(m.kept) > keepJobs && m.kept[0].State != StateQueued && m.kept[0].State != StateRunning {
		delete(m.jobs, m.kept[0].ID)
		m.kept = m.kept[1:]
	}
	select {
	case m.wake <- struct{}{}:
	default:
	}
	return m.snapshot(j), nil
}

// Get returns a copy of job id as it stands.
func (m *Manager) Get(id string) (Job, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.jobs[id]
	if !ok {
		return Job{}, false
	}
	return m.snapshot(j), true
}

// ErrNoJob is a job id the manager does not know.
var ErrNoJob = errors.New("no such sweep")

// Cancel stops a sweep: a queued one never starts, a running one stops after
// the point in flight. Its results so far stay.
func (m *Manager) Cancel(id string) (Job, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	j, ok := m.jobs[id]
	if !ok {
		return Job{}, ErrNoJob
	}
	switch j.State {
	case StateQueued:
		for k, q := range m.queue {
			if q == j {
				m.queue = append(m.queue[:k], m.queue[k+1:]...)
				break
			}
		}
		j.State, j.Finished = StateCancelled, time.Now()
	case StateRunning:
		j.cancel()
	}
	return m.snapshot(j), nil
}

// Close stops the manager, cancelling the running sweep. Calling it again
// is harmless.
func (m *Manager) Close() {
	m.closeOnce.Do(func() { close(m.stop) })
	<-m.done
}

func (m *Manager) snapshot(j *Job) Job {
	c := *j
	c.Results = append([]Result{}, j.Results...)
	c.cancel = nil
	if j.State == StateQueued {
		for k, q := range m.queue {
			if q == j {
				c.Ahead = k
				if m.runningLocked() {
					c.Ahead++
				}
			}
		}
	}
	return c
}

func (m *Manager) runningLocked() bool {
	for _, j := range m.jobs {
		if j.State == StateRunning {
			return true
		}
	}
	return false
}

func (m *Manager) loop() {
	defer close(m.done)
	for {
		m.mu.Lock()
		var j *Job
		if len(m.queue) > 0 {
			j, m.queue = m.queue[0], m.queue[1:]
		}
		m.mu.Unlock()
		if j == nil {
			select {
			case <-m.wake:
				continue
			case <-m.stop:
				return
			}
		}
		m.run(j)
		select {
		case <-m.stop:
			return
		default:
		}
	}
}

// run sweeps job j's points in order, recording each result as it comes.
func (m *Manager) run(j *Job) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-m.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	m.mu.Lock()
	j.State, j.Started, j.cancel = StateRunning, time.Now(), cancel
	m.mu.Unlock()
	ex := m.execs[j.Spec.Engine]
	state, msg := StateDone, ""
	for _, p := range j.Spec.Points() {
		if ctx.Err() != nil {
			state = StateCancelled
			break
		}
		r, err := ex.Time(ctx, p, j.Spec.Repeats, rand.Uint64())
		if err != nil {
			if ctx.Err() != nil {
				state = StateCancelled
			} else {
				state, msg = StateFailed, fmt.Sprintf("N=%d, d=%d, %s: %v", p.N, p.D, p.Variant, err)
			}
			break
		}
		m.mu.Lock()
		j.Results = append(j.Results, r)
		j.Done++
		if r.FreeBefore > 0 {
			if j.Memory == nil {
				j.Memory = &MemoryCheck{FreeBefore: r.FreeBefore}
			}
			j.Memory.FreeAfter = r.FreeAfter
		}
		m.mu.Unlock()
	}
	m.mu.Lock()
	j.State, j.Error, j.Finished = state, msg, time.Now()
	m.mu.Unlock()
}

// kernelLabel names what a point runs: its compiled kernels, or for a
// shape no kernel is compiled at (a CPU sweep), the variant and its tiles.
func kernelLabel(p Point) string {
	c := p.Config(0)
	c.Batch, c.Heads = 1, 1 // the plan's kernels do not depend on them; Validate's limits do
	if plan, err := launch.For(&c); err == nil {
		var names []string
		for _, k := range plan.Kernels {
			names = append(names, k.Name)
		}
		return strings.Join(names, " + ")
	}
	return fmt.Sprintf("%s (Go mirror tiles %d×%d)", p.Variant, c.Br, c.Bc)
}
