// Package labrun runs students' kernels for the lab's kernel track: a fair
// queue in front of the GPU, one process per submission (the GPU worker
// with -lab, confined by package sandbox and killed past its limit:
// process.go), and the grading of what comes back against the reference
// kernel's trace (package lab). A submission whose student stops asking
// about it is cancelled, its process killed.
package labrun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"flashstep/instrument"
	"flashstep/kernels"
	"flashstep/lab"
	"flashstep/ladder"
	"flashstep/problem"
	"flashstep/sandbox"
)

// Options say how submissions run. Command nil: the kernel track is off.
type Options struct {
	Command []string // the GPU worker
	// Sandbox confines each submission's process (package sandbox): the
	// unprivileged user it runs as where the server is root, variables a
	// test adds.
	Sandbox sandbox.Options
	// Limit bounds one submission's compile and runs (default 20 s).
	Limit time.Duration
	// Concurrent is how many kernels run at once (default 1: the GPU is
	// the class's, and a student's timing should be its own).
	Concurrent int
	// QueueMax is how many submissions may wait (default 64).
	QueueMax int
	// PerAddress is how many submissions from one client address may be
	// live (queued or running) at once (default 8), whatever identities
	// they carry: a room's student has one live submission, but an
	// identity costs one GET of a room's page and anyone may open a room,
	// so without this one address could fetch a new identity before each
	// submission and fill the queue with kernels that never end. A class
	// behind a trusted proxy (-trusted-proxies) has an address per
	// student; a class behind one NAT without such a proxy shares this
	// bound, and its students past it are told to wait for a verdict.
	PerAddress int
	// Abandoned is how long a submission waits for its student to ask
	// about it before it is cancelled (default 15 s).
	Abandoned time.Duration
	// Ladder, if set, is the ladder's recorded figures: a passing kernel
	// is timed at their size and placed among the rungs.
	Ladder *ladder.Table
	// Sanitizer is compute-sanitizer's path where it is installed: a
	// student may then ask for one of its Checks on a submission ("" :
	// not offered).
	Sanitizer string
}

// Check is a compute-sanitizer tool a student may ask to run a submission
// under: slower (three times the time limit) and not timed, but it finds
// what a lucky run hides.
type Check string

const (
	NoCheck   Check = ""
	Memcheck  Check = "memcheck"  // every access outside the buffers the kernel was given
	Racecheck Check = "racecheck" // accesses to shared memory that no barrier orders
)

// ParseCheck reads a submission's check as its URL names it.
func ParseCheck(s string) (Check, error) {
	switch c := Check(s); c {
	case NoCheck, Memcheck, Racecheck:
		return c, nil
	}
	return NoCheck, kernels.FieldErrors{{Field: "check", Message: fmt.Sprintf("check must be %q or %q, or absent (got %.24q)", Memcheck, Racecheck, s)}}
}

func (o Options) withDefaults() Options {
	if o.Limit == 0 {
		o.Limit = 20 * time.Second
	}
	if o.Concurrent == 0 {
		o.Concurrent = 1
	}
	if o.QueueMax == 0 {
		o.QueueMax = 64
	}
	if o.PerAddress == 0 {
		o.PerAddress = 8
	}
	if o.Abandoned == 0 {
		o.Abandoned = 15 * time.Second
	}
	return o
}

// busy refuses a submission that was not taken (problem.Busy); its
// message says why, in the student's words.
func busy(format string, args ...any) error {
	return problem.Newf(problem.Busy, format, args...)
}

// OffWhy is what the kernel track's pages, and a submission's refusal
// (ErrOff), say while the track is off at this server.
const OffWhy = "The kernel track compiles your CUDA at run time (NVRTC) and runs it on the server's GPU, " +
	"in a process of its own. It is not on at this server: write your kernel here and check it against the solution, " +
	"step the solution's run, recorded on a GPU, beside the reference kernel's, and step the reference kernel's own run below to see what every record of yours should hold."

// ErrOff: the kernel track is not on at this server (problem.Forbidden).
var ErrOff = problem.New(problem.Forbidden, OffWhy)

// BrowserExercise is the refusal of a loop exercise sent to run on the
// GPU: its code is JavaScript, graded in the student's page.
func BrowserExercise(e *lab.Exercise) error {
	return kernels.FieldErrors{{Field: "exercise", Message: fmt.Sprintf("exercise %s runs in the browser (its page grades your code there), not on the GPU: only the kernel track's exercises are submitted", e.ID)}}
}

// State is where a submission is in its life.
type State string

const (
	StateQueued    State = "queued"    // waiting for the GPU
	StateRunning   State = "running"   // compiling or running
	StateDone      State = "done"      // its verdict is in
	StateCancelled State = "cancelled" // nobody asked about it for a while, or the server shut down
)

// Status is where a submission stands.
type Status struct {
	State    State    `json:"state"`
	Exercise string   `json:"exercise"` // the exercise's id
	Ahead    int      `json:"ahead"`    // submissions before it, while queued
	Verdict  *Verdict `json:"verdict,omitempty"`
	// Room is the room whose page it came from ("" : none), Student the
	// student who submitted it there: a room counts the verdict for that
	// student alone. Student stays out of the JSON: anyone holding the
	// ticket reads the status, and a student's identity is the room's.
	Room    string `json:"room,omitempty"`
	Student string `json:"-"`
}

// Owner is who a submission is for, when it comes from a room's page:
// the room's code, and the student's identity in it, one the room issued
// (empty when the request carried none). A room counts a kernel's verdict
// for its owner only, so a ticket passed to another student counts for
// nobody else.
type Owner struct {
	Room    string
	Student string
}

// Verdict is a finished submission's result.
type Verdict struct {
	// Verdict is "pass", "fail" (a difference: Miss), "compile" (Log, Line),
	// "error" (the kernel failed on the GPU, or its process died: Message)
	// or "timeout".
	Verdict string    `json:"verdict"`
	Message string    `json:"message"`
	Line    int       `json:"line,omitempty"`
	Log     string    `json:"log,omitempty"`
	Miss    *lab.Miss `json:"miss,omitempty"`
	// Output is what the kernel's threads printed (printf) on the
	// exercise's runs, its first lab.MaxOutputBytes; OutputCut counts the
	// bytes past them.
	Output    string `json:"output,omitempty"`
	OutputCut int    `json:"output_cut,omitempty"`
	// Steps are the student's records on the exercise's own run, for the
	// page to step beside the reference kernel's.
	Steps []lab.StepSeen `json:"steps,omitempty"`
	// Placed is a passing kernel's speed among the ladder's rungs.
	Placed *Placement `json:"placed,omitempty"`
	Ms     float64    `json:"ms"`   // the kernel on the exercise's run
	Took   float64    `json:"took"` // seconds from the start of the process to its answer
	Seed   uint64     `json:"seed"` // of the hidden runs
}

// Placement is a passing kernel timed at the ladder's size, beside the
// rungs' recorded figures at that shape, fastest last.
type Placement struct {
	Shape  string       `json:"shape"`
	Ms     float64      `json:"ms"`
	TFLOPs float64      `json:"tflops"`
	Rungs  []PlacedRung `json:"rungs"`
	Note   string       `json:"note,omitempty"` // why it could not be timed
	// Source names where the rungs' figures come from; FloatRungs says
	// why a float32 kernel of the lab's may outrun the ladder's float32
	// rungs.
	Source     string `json:"source,omitempty"`
	FloatRungs string `json:"float_rungs,omitempty"`
}

// floatRungsNote is what a placement says beside the float32 rungs,
// measured on an H200 on 2026-11-27 (docs/GPU.md, TestLabFMA).
const floatRungsNote = "The ladder's float32 rungs (1–4) round every multiply and add on its own (__fmul_rn, __fadd_rn), " +
	"so that their records match their CPU mirrors bit for bit; NVRTC fuses your kernel's into FMAs. " +
	"That fusion is worth 1.08–1.11× on the lab's solutions (compiled with and without it, same GPU): " +
	"the rest of a lab kernel's lead over rung 4 is its own code, not measured apart."

// Among sets p's rungs from tab, the ladder's recorded figures, at the
// shape exercise e is timed at, with the kernel's own row among them,
// slowest first. A recorded verdict is placed again this way, so that a
// rung's figure is the ladder's, wherever it is shown.
func (p *Placement) Among(tab *ladder.Table, e *lab.Exercise, who string) {
	req, _ := e.TimingFor("")
	p.Rungs = nil
	if tab != nil {
		p.Source = "the ladder's figures (recordings/ladder-h100.json), as /ladder shows them"
		for k, shape := range tab.Shapes {
			if shape.D != req.D || shape.Causal != req.Timing.Causal {
				continue
			}
			for _, row := range tab.Rows {
				if c := row.Cells[k]; row.Rung.Built && !c.Missing {
					p.Rungs = append(p.Rungs, PlacedRung{Name: row.Rung.Name, Number: row.Rung.Number, TFLOPs: c.TFLOPs})
					if row.Rung.Name == "flash2" {
						p.FloatRungs = floatRungsNote
					}
				}
			}
		}
	}
	p.Rungs = append(p.Rungs, PlacedRung{Name: who, TFLOPs: p.TFLOPs, Yours: true})
	sort.SliceStable(p.Rungs, func(a, b int) bool { return p.Rungs[a].TFLOPs < p.Rungs[b].TFLOPs })
}

// PlacedRung is one row of the placement: a rung, or the student's kernel.
type PlacedRung struct {
	Name   string  `json:"name"`
	Number int     `json:"number"` // 0: the student's
	TFLOPs float64 `json:"tflops"`
	Yours  bool    `json:"yours,omitempty"`
}

// Service queues and runs submissions.
type Service struct {
	o       Options
	mu      sync.Mutex
	queue   []*ticket // waiting, in order
	running int
	byID    map[string]*ticket
	byAddr  map[string]*ticket // each student's (or address's) one live submission, by ticket.addr
	perAddr map[string]int     // live submissions by client address, ticket.from
	closed  bool
}

type ticket struct {
	// addr is what allows one live submission: the room's student, else
	// the client's address; from is always the client's address, which
	// PerAddress bounds.
	id, addr, from string
	owner          Owner
	e              *lab.Exercise
	source         string
	check          Check
	state          State
	verdict        *Verdict
	seen           time.Time
	cancel         context.CancelFunc
	ctx            context.Context
}

// New starts a service; Close stops it.
func New(o Options) *Service {
	s := &Service{o: o.withDefaults(), byID: map[string]*ticket{}, byAddr: map[string]*ticket{}, perAddr: map[string]int{}}
	if o.Command != nil {
		go s.janitor()
	}
	return s
}

// On says whether the kernel track runs here.
func (s *Service) On() bool { return s.o.Command != nil }

// Checks says whether a submission may ask for compute-sanitizer.
func (s *Service) Checks() bool { return s.On() && s.o.Sanitizer != "" }

// Submit queues source for exercise e from a student at addr (in a
// room: owner), under compute-sanitizer's check if one is asked for (and
// offered). It refuses at once, busy (problem.Busy), a second submission
// while the student has one waiting or running, and any past the queue's
// bound, or past Options.PerAddress live from addr whoever the students;
// a loop exercise, which runs in the browser, with a FieldErrors. A
// student is the identity a room issued, where the submission comes from
// a room's page (a class behind one school's NAT is many students), else
// the address.
func (s *Service) Submit(e *lab.Exercise, source, addr string, check Check, owner Owner) (string, error) {
	from, key := addr, addr
	if owner.Student != "" {
		key = "student " + owner.Room + " " + owner.Student
	}
	if e.Track != lab.TrackKernel {
		return "", BrowserExercise(e)
	}
	if !s.On() {
		return "", ErrOff
	}
	if check != NoCheck && s.o.Sanitizer == "" {
		return "", kernels.FieldErrors{{Field: "check", Message: "compute-sanitizer is not installed on this GPU machine"}}
	}
	if len(source) > lab.MaxSourceBytes {
		return "", kernels.FieldErrors{{Field: "source", Message: fmt.Sprintf("the source must be at most %d bytes (got %d)", lab.MaxSourceBytes, len(source))}}
	}
	if strings.TrimSpace(source) == "" {
		return "", kernels.FieldErrors{{Field: "source", Message: "the source is empty"}}
	}
	// The pages check first (before anything else, track on or off);
	// checked here too, so no caller can hand the compiler a file's name.
	if err := lab.CheckSource(source); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return "", busy("the server is shutting down")
	}
	if t := s.byAddr[key]; t != nil {
		return "", busy("your last kernel is still queued or running: wait for its verdict")
	}
	if n := s.perAddr[from]; n >= s.o.PerAddress {
		return "", busy("%d kernels from your address are queued or running, as many as one address may have: wait for one's verdict", n)
	}
	if len(s.queue) >= s.o.QueueMax {
		return "", busy("%d kernels are waiting for the GPU", len(s.queue))
	}
	var b [12]byte
	rand.Read(b[:])
	ctx, cancel := context.WithCancel(context.Background())
	t := &ticket{id: hex.EncodeToString(b[:]), addr: key, from: from, owner: owner, e: e, source: source, check: check, state: StateQueued, seen: time.Now(), ctx: ctx, cancel: cancel}
	s.byID[t.id], s.byAddr[key] = t, t
	s.perAddr[from]++
	s.queue = append(s.queue, t)
	s.startLocked()
	return t.id, nil
}

// Status says where submission id stands, and notes that its student is
// still there.
func (s *Service) Status(id string) (Status, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.byID[id]
	if t == nil {
		return Status{}, false
	}
	t.seen = time.Now()
	st := Status{State: t.state, Exercise: t.e.ID, Verdict: t.verdict, Room: t.owner.Room, Student: t.owner.Student}
	if t.state == StateQueued {
		for k, q := range s.queue {
			if q == t {
				st.Ahead = k + s.running
			}
		}
	}
	return st, true
}

// Close cancels every submission and refuses new ones.
func (s *Service) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for _, t := range s.byID {
		t.cancel()
	}
}

func (s *Service) startLocked() {
	for s.running < s.o.Concurrent && len(s.queue) > 0 {
		t := s.queue[0]
		s.queue = s.queue[1:]
		t.state = StateRunning
		s.running++
		go s.run(t)
	}
}

func (s *Service) run(t *ticket) {
	v := s.grade(t)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.running--
	if t.ctx.Err() != nil && t.state != StateDone {
		t.state = StateCancelled
	} else {
		t.state, t.verdict = StateDone, v
	}
	s.notLiveLocked(t)
	t.cancel()
	s.startLocked()
}

// notLiveLocked forgets t among the live submissions, once it is done or
// cancelled: its student and its address may submit again.
func (s *Service) notLiveLocked(t *ticket) {
	delete(s.byAddr, t.addr)
	if s.perAddr[t.from]--; s.perAddr[t.from] <= 0 {
		delete(s.perAddr, t.from)
	}
}

// janitor cancels submissions nobody asks about, and forgets finished ones
// once their student has had time to read them.
func (s *Service) janitor() {
	tick := time.NewTicker(s.o.Abandoned / 3)
	defer tick.Stop()
	for range tick.C {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return
		}
		now := time.Now()
		for id, t := range s.byID {
			idle := now.Sub(t.seen)
			switch {
			case t.state == StateQueued && idle > s.o.Abandoned:
				t.state = StateCancelled
				t.cancel()
				for k, q := range s.queue {
					if q == t {
						s.queue = append(s.queue[:k], s.queue[k+1:]...)
						break
					}
				}
				s.notLiveLocked(t)
			case t.state == StateRunning && idle > s.o.Abandoned:
				t.cancel() // kills its process; run() finishes the rest
			case (t.state == StateDone || t.state == StateCancelled) && idle > 4*s.o.Abandoned:
				delete(s.byID, id)
			}
		}
		s.mu.Unlock()
	}
}

// grade runs the submission and holds it to the reference.
func (s *Service) grade(t *ticket) *Verdict {
	seed := uint64(time.Now().UnixNano()) >> 1
	req, runs := t.e.KernelRequestFor(t.source, seed)
	proc, limit := Process{Command: s.o.Command, Sandbox: s.o.Sandbox}, s.o.Limit
	if t.check != NoCheck {
		// A sanitizer runs a kernel tens of times slower: three times the time.
		proc.Sanitizer, proc.Tool, limit = s.o.Sanitizer, string(t.check), 3*limit
	}
	res, err := RunProcess(t.ctx, proc, req, limit)
	reply := res.Reply
	v := &Verdict{Seed: seed, Took: res.Took.Seconds(), Output: res.Output, OutputCut: res.OutputCut}
	if t.check != NoCheck {
		if found := sanitizerFound(t.check, res.Report); found != "" {
			v.Verdict, v.Log = string(t.check), found
			v.Message = checkFound[t.check]
			return v
		}
	}
	switch {
	case errors.Is(err, ErrTimeout):
		v.Verdict = "timeout"
		v.Message = fmt.Sprintf("Your kernel (with its compilation) ran past the %v limit and was stopped: does every thread's loop end, and does every thread of a block reach each __syncthreads()?", s.o.Limit)
		return v
	case err != nil:
		v.Verdict, v.Message = "error", err.Error()
		return v
	case res.Crash != "":
		v.Verdict, v.Message = "compile", res.Crash
		return v
	case reply.Stage == "compile":
		v.Verdict, v.Log, v.Line = "compile", reply.Log, lab.FirstErrorLine(reply.Log)
		v.Message = "Your kernel does not compile."
		if reply.Error != "" {
			v.Verdict, v.Message = "error", reply.Error
		}
		return v
	case reply.Stage != "done":
		v.Verdict, v.Message = "error", reply.Error
		return v
	}
	v.Ms = reply.Runs[0].Ms
	v.Steps = reply.Runs[0].Steps
	run, err := runs[0].Check()
	if err != nil {
		v.Verdict, v.Message = "error", err.Error()
		return v
	}
	var recs []*instrument.Record
	if err := kernels.RunMirror(t.ctx, run, func(r *instrument.Record) error { recs = append(recs, r); return nil }); err != nil {
		v.Verdict, v.Message = "error", err.Error()
		return v
	}
	for k, c := range runs {
		if m := lab.GradeKernelRun(c, reply.Runs[k], recs, k == 0); m != nil {
			m.Run = k
			v.Verdict, v.Miss = "fail", m
			v.Message = m.Describe(c)
			return v
		}
	}
	v.Verdict = "pass"
	v.Message = fmt.Sprintf("Passed: every record of your kernel matches the reference kernel's on its run, and its output matches the float64 reference on %d hidden runs.", len(runs)-1)
	if t.check != NoCheck {
		v.Message += " " + checkClean[t.check]
		return v // timed without the sanitizer, on another submission
	}
	v.Placed = s.place(t)
	return v
}

// What a check's verdict says, when it found something and when not.
var (
	checkFound = map[Check]string{
		Memcheck: "compute-sanitizer's memcheck found your kernel reading or writing outside the buffers it was given (its report is below): an index past the end of a row, a tile or the sequence.",
		Racecheck: "compute-sanitizer's racecheck found threads of a block reading and writing the same shared memory with no barrier between them (its report is below): " +
			"a thread reads a tile before every thread has finished loading it, or loads the next tile over one that others still read. Your numbers may come out right by luck; on another run, or another GPU, they will not.",
	}
	checkClean = map[Check]string{
		Memcheck:  "compute-sanitizer's memcheck found no access outside the buffers.",
		Racecheck: "compute-sanitizer's racecheck found no race on shared memory.",
	}
)

// sanitizerFound is the part of report that says what check found, ""
// when it found nothing: memcheck's invalid and misaligned accesses,
// racecheck's races. racecheck files a read of a tile that another warp
// may not have finished writing (a missing barrier) as a "Warning" (so it
// did on the H100): a race of either severity is a verdict, since either
// gives a student numbers that depend on the warps' order.
func sanitizerFound(check Check, report string) string {
	if !reportFinds(check, report) {
		return ""
	}
	if len(report) > lab.MaxLogBytes {
		report = report[:lab.MaxLogBytes] + "\n…"
	}
	return report
}

func reportFinds(check Check, report string) bool {
	switch check {
	case Memcheck:
		for _, what := range []string{"Invalid __global__", "Invalid __shared__", "Invalid __local__", "Misaligned", "Out-of-range"} {
			if strings.Contains(report, what) {
				return true
			}
		}
	case Racecheck:
		// "Warning: Race reported between Write access at attention+0x560
		// in student.cu:16 and Read access at … [256 hazards]", and its
		// summary "RACECHECK SUMMARY: 4 hazards displayed (0 errors, 4
		// warnings)".
		if strings.Contains(report, "Race reported") {
			return true
		}
		if m := racecheckSummary.FindStringSubmatch(report); m != nil && m[1] != "0" {
			return true
		}
	}
	return false
}

var racecheckSummary = regexp.MustCompile(`RACECHECK SUMMARY: (\d+) hazards? displayed`)

// place times a passing kernel at the ladder's size and sets it among the
// rungs' recorded figures at the same shape.
func (s *Service) place(t *ticket) *Placement {
	req, flops := t.e.TimingFor(t.source)
	tm := req.Timing
	p := &Placement{Shape: fmt.Sprintf("N=%d, d=%d, B·N=%d, H·d=%d%s", tm.N, req.D, tm.Batch*tm.N, tm.Heads*req.D, map[bool]string{true: ", causal"}[tm.Causal])}
	res, err := RunProcess(t.ctx, Process{Command: s.o.Command, Sandbox: s.o.Sandbox}, req, s.o.Limit)
	reply := res.Reply
	switch {
	case errors.Is(err, ErrTimeout):
		p.Note = fmt.Sprintf("at the ladder's size your kernel ran past the %v limit: too slow to place", s.o.Limit)
		return p
	case err != nil:
		p.Note = "it could not be timed: " + err.Error()
		return p
	case reply.Stage != "done":
		p.Note = "it could not be timed at the ladder's 64×64 tiles: " + reply.Error + firstLine(reply.Log)
		return p
	}
	p.Ms = reply.TimedMs
	p.TFLOPs = flops / (p.Ms * 1e9)
	p.Among(s.o.Ladder, t.e, "your kernel")
	return p
}

func firstLine(log string) string {
	if line, _, _ := strings.Cut(strings.TrimSpace(log), "\n"); line != "" {
		return " (" + line + ")"
	}
	return ""
}

// Recording is an exercise's recorded.json (lab.Exercise.Recorded): its
// solution's verdict as this server answered it on a GPU, which pages
// without the kernel track step instead of a student's.
type Recording struct {
	GPU     string  `json:"gpu"`
	Driver  string  `json:"driver"`
	Date    string  `json:"date"`
	How     string  `json:"how"`
	Verdict Verdict `json:"verdict"`
}
