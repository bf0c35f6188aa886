// Command loadgen measures a classroom under load. It starts a flashstep
// server on loopback (CPU mode) and runs one of two scenarios:
//
//	loadgen [-server bin/server] [-students 300] [-rate 10] [-duration 30s] [-run QUERY]
//	loadgen -overload 200 [-heavy QUERY]
//
// The class: a presenter opens a room on a run; every student joins it,
// fetches the run's trace over the websocket as the page does, and then
// follows the presenter's steps. It prints how many traces the server
// computed (one is the goal: the class shares it), how long until every
// student had the trace, the step delays, steps never delivered (and those
// coalesced: replaced by a newer step in a slow student's mailbox), and the
// server's resident memory at start and at its peak.
//
// The overload: as many clients as asked, each from its own loopback
// address, ask at once for a distinct heavy run; every one must get its
// trace or an explicit busy answer, none a silent cut; it prints how each
// ended and the server's resident memory.
//
// It talks to loopback only, opens a bounded number of connections, and
// stops by itself (a minute past the duration at most). `make loadtest`
// runs both scenarios.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "loadgen:", err)
		os.Exit(1)
	}
}

type options struct {
	server   string
	students int
	rate     float64
	duration time.Duration
	query    string
	overload int
	heavy    string
	memory   int
}

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	var o options
	fs.StringVar(&o.server, "server", "bin/server", "the flashstep server binary to start on loopback")
	fs.IntVar(&o.students, "students", 300, "student connections (1–2000)")
	fs.Float64Var(&o.rate, "rate", 10, "presenter steps a second (0.1–50)")
	fs.DurationVar(&o.duration, "duration", 30*time.Second, "how long the presenter steps (1s–5m)")
	fs.StringVar(&o.query, "run", "variant=flash2&n=256&d=64&br=64&bc=64&seed=1&engine=cpu", "the run the room shows (engine=cpu: the CPU mirror computes it, not a recording)")
	fs.IntVar(&o.overload, "overload", 0, "instead of a class: this many clients (1–1000) ask at once for distinct heavy runs")
	fs.StringVar(&o.heavy, "heavy", "variant=flash2&n=1024&d=64&br=64&bc=64", "the overload's run; each client adds its own seed")
	fs.IntVar(&o.memory, "trace-memory", 256, "the server's -trace-memory, MiB")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case o.students < 1 || o.students > 2000:
		return fmt.Errorf("-students must be from 1 to 2000, got %d", o.students)
	case o.rate < 0.1 || o.rate > 50:
		return fmt.Errorf("-rate must be from 0.1 to 50 a second, got %g", o.rate)
	case o.duration < time.Second || o.duration > 5*time.Minute:
		return fmt.Errorf("-duration must be from 1s to 5m, got %v", o.duration)
	case o.overload < 0 || o.overload > 1000:
		return fmt.Errorf("-overload must be from 1 to 1000 clients, got %d", o.overload)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.duration+2*time.Minute)
	defer cancel()
	srv, err := startServer(ctx, o.server, o.memory)
	if err != nil {
		return err
	}
	defer srv.stop()
	if o.overload > 0 {
		return overload(ctx, srv, o, out)
	}
	return class(ctx, srv, o, out)
}

// class runs the classroom scenario.
func class(ctx context.Context, srv *server, o options, out io.Writer) error {
	fmt.Fprintf(out, "server              %s (%s, CPU mode), %d students, presenter %g steps/s for %v\n", srv.base, o.server, o.students, o.rate, o.duration)
	fmt.Fprintf(out, "run                 %s\n", o.query)
	before, err := srv.stats()
	if err != nil {
		return err
	}
	startRSS := srv.rss()
	peak := srv.samplePeak(ctx)
	room, err := createRoom(srv.base, o.query)
	if err != nil {
		return err
	}
	steps := int(o.rate * o.duration.Seconds())
	sent := make([]atomic.Int64, steps+1) // when step k was sent, unix ns

	type student struct {
		recv       []int64 // by step: unix ns, 0 if never
		outOfOrder int
		trace      outcome
		traceAt    time.Duration // since the first join
	}
	logs := make([]*student, o.students)
	var wg sync.WaitGroup
	var traced sync.WaitGroup
	conns := make([]*websocket.Conn, 0, o.students)
	start := time.Now()
	for i := range o.students {
		conn, hello, err := join(ctx, srv.base, room.Code, "")
		if err != nil {
			return fmt.Errorf("student %d: %w", i, err)
		}
		conns = append(conns, conn)
		l := &student{recv: make([]int64, steps+1)}
		logs[i] = l
		// The page fetches the room's run's trace as soon as it joins.
		traced.Add(1)
		go func() {
			defer traced.Done()
			l.trace = fetchTrace(ctx, websocket.DefaultDialer, srv.base, hello.Query)
			l.traceAt = time.Since(start)
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			last := 0
			for {
				_, data, err := conn.ReadMessage()
				if err != nil {
					return
				}
				now := time.Now().UnixNano()
				var e struct {
					Type string
					Step int
				}
				if json.Unmarshal(data, &e) != nil || e.Type != "step" || e.Step < 1 || e.Step > steps {
					continue
				}
				if e.Step <= last {
					l.outOfOrder++
				}
				last = e.Step
				if l.recv[e.Step] == 0 {
					l.recv[e.Step] = now
				}
			}
		}()
	}
	traced.Wait()
	everyone := time.Since(start)
	afterTraces, _ := srv.stats()
	joinedRSS := srv.rss()

	pres, _, err := join(ctx, srv.base, room.Code, room.Token)
	if err != nil {
		return fmt.Errorf("presenter: %w", err)
	}
	go io.Copy(io.Discard, pres.UnderlyingConn()) // never read: the server coalesces its tallies

	tick := time.NewTicker(time.Duration(float64(time.Second) / o.rate))
	for k := 1; k <= steps; k++ {
		<-tick.C
		sent[k].Store(time.Now().UnixNano())
		msg, _ := json.Marshal(map[string]any{"type": "step", "step": k, "total": steps})
		pres.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if err := pres.WriteMessage(websocket.TextMessage, msg); err != nil {
			return fmt.Errorf("presenter step %d: %w", k, err)
		}
	}
	tick.Stop()
	time.Sleep(time.Second) // the last steps arrive
	after, _ := srv.stats()
	peakRSS := peak()
	for _, c := range conns {
		c.Close()
	}
	pres.Close()
	wg.Wait()

	var delays []time.Duration
	missing, disorder := 0, 0
	outcomes := map[string]int{}
	var traceTimes []time.Duration
	for _, l := range logs {
		disorder += l.outOfOrder
		outcomes[l.trace.kind]++
		traceTimes = append(traceTimes, l.traceAt)
		for k := 1; k <= steps; k++ {
			if l.recv[k] == 0 {
				missing++
				continue
			}
			delays = append(delays, time.Duration(l.recv[k]-sent[k].Load()))
		}
	}
	slices.Sort(delays)
	slices.Sort(traceTimes)
	coalesced := after.Rooms.Coalesced - before.Rooms.Coalesced
	tb, err := traceBytes(srv.base, o.query)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "traces computed     %d for %d students (%d replays of a recording; %d joined a computation while it ran, %d read the cache)\n",
		afterTraces.Runs.Computed-before.Runs.Computed, o.students, afterTraces.Runs.Replayed-before.Runs.Replayed,
		afterTraces.Runs.Shared-before.Runs.Shared, afterTraces.Runs.Cached-before.Runs.Cached)
	fmt.Fprintf(out, "traces received     %s\n", describe(outcomes))
	fmt.Fprintf(out, "every student had it %v after the first joined (median student %v)\n", everyone.Round(time.Millisecond), pct(traceTimes, 0.5).Round(time.Millisecond))
	fmt.Fprintf(out, "step delay p50      %v\n", pct(delays, 0.50).Round(10*time.Microsecond))
	fmt.Fprintf(out, "step delay p99      %v\n", pct(delays, 0.99).Round(10*time.Microsecond))
	fmt.Fprintf(out, "step delay max      %v\n", pct(delays, 1).Round(10*time.Microsecond))
	fmt.Fprintf(out, "steps sent          %d to each of %d students (%d deliveries)\n", steps, o.students, steps*o.students)
	fmt.Fprintf(out, "steps never arrived %d\n", missing)
	fmt.Fprintf(out, "events coalesced    %d (replaced by a newer one in a slow reader's mailbox: a step, or a tally of the presenter, whose page here never reads them)\n", coalesced)
	fmt.Fprintf(out, "steps out of order  %d\n", disorder)
	fmt.Fprintf(out, "server resident     %s at start, %s with the class holding the trace, %s at the peak\n", mib(startRSS), mib(joinedRSS), mib(peakRSS))
	fmt.Fprintf(out, "trace per student   %d bytes uncompressed (websocket), %d gzip (HTTP fallback, %.0f%%), %d per-frame deflate (%.0f%%)\n",
		tb.Raw, tb.Gzip, 100*float64(tb.Gzip)/float64(max(tb.Raw, 1)), tb.Deflate, 100*float64(tb.Deflate)/float64(max(tb.Raw, 1)))
	fmt.Fprintf(out, "trace for the class %s sent, computed once\n", mib(uint64(tb.Raw*o.students)))
	if outcomes["ok"] != o.students {
		return fmt.Errorf("%d of %d students did not get the trace", o.students-outcomes["ok"], o.students)
	}
	return nil
}

// overload runs the overload scenario.
func overload(ctx context.Context, srv *server, o options, out io.Writer) error {
	fmt.Fprintf(out, "server              %s (%s, CPU mode, -trace-memory %d MiB), %d clients at once, each from its own address\n", srv.base, o.server, o.memory, o.overload)
	fmt.Fprintf(out, "runs                %s with seeds 1–%d (all distinct)\n", o.heavy, o.overload)
	before, err := srv.stats()
	if err != nil {
		return err
	}
	startRSS := srv.rss()
	peak := srv.samplePeak(ctx)
	results := make([]outcome, o.overload)
	var wg sync.WaitGroup
	start := time.Now()
	gate := make(chan struct{})
	for i := range o.overload {
		wg.Go(func() {
			<-gate
			d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 2, byte(i>>8), byte(i))}}
			dialer := &websocket.Dialer{NetDialContext: d.DialContext, HandshakeTimeout: 30 * time.Second}
			results[i] = fetchTrace(ctx, dialer, srv.base, o.heavy+"&seed="+strconv.Itoa(i+1))
		})
	}
	close(gate)
	wg.Wait()
	took := time.Since(start)
	after, _ := srv.stats()
	peakRSS := peak()
	outcomes := map[string]int{}
	var okTimes []time.Duration
	for _, r := range results {
		outcomes[r.kind]++
		if r.kind == "ok" {
			okTimes = append(okTimes, r.took)
		}
	}
	slices.Sort(okTimes)
	fmt.Fprintf(out, "answers             %s, all within %v\n", describe(outcomes), took.Round(time.Millisecond))
	fmt.Fprintf(out, "traces computed     %d (busy refusals counted by the server: %d)\n", after.Runs.Computed-before.Runs.Computed, after.Runs.Busy-before.Runs.Busy)
	if len(okTimes) > 0 {
		fmt.Fprintf(out, "complete traces     %d, each %s; slowest after %v\n", len(okTimes), mib(uint64(results[slices.IndexFunc(results, func(r outcome) bool { return r.kind == "ok" })].bytes)), okTimes[len(okTimes)-1].Round(time.Millisecond))
	}
	fmt.Fprintf(out, "server resident     %s at start, %s at the peak (traces held: at most %d MiB by -trace-memory)\n", mib(startRSS), mib(peakRSS), o.memory)
	for _, r := range results {
		if r.kind == "cut" {
			fmt.Fprintf(out, "a silent cut:       %s\n", r.detail)
			break
		}
	}
	if outcomes["cut"] > 0 || outcomes["error"] > 0 {
		return fmt.Errorf("%d silent cuts and %d errors", outcomes["cut"], outcomes["error"])
	}
	return nil
}

// outcome is how one trace request ended: ok (the whole trace), busy (an
// explicit busy answer: a busy message, close 1013, or HTTP 503), error
// (another explicit error) or cut (the connection ended with no answer).
type outcome struct {
	kind   string
	detail string
	bytes  int
	took   time.Duration
}

func describe(m map[string]int) string {
	var parts []string
	for _, k := range []string{"ok", "busy", "error", "cut"} {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], map[string]string{"ok": "whole traces", "busy": "explicit busy", "error": "errors", "cut": "silent cuts"}[k]))
	}
	return strings.Join(parts, ", ")
}

// fetchTrace reads a run's trace over the websocket, as the stepper does.
func fetchTrace(ctx context.Context, dialer *websocket.Dialer, base, query string) outcome {
	start := time.Now()
	conn, res, err := dialer.DialContext(ctx, "ws"+strings.TrimPrefix(base, "http")+"/ws/trace?"+query, nil)
	if err != nil {
		if res != nil && res.StatusCode == http.StatusServiceUnavailable {
			return outcome{kind: "busy", detail: res.Status}
		}
		return outcome{kind: "cut", detail: "dial: " + err.Error()}
	}
	defer conn.Close()
	n, busy := 0, ""
	for {
		conn.SetReadDeadline(time.Now().Add(90 * time.Second))
		kind, data, err := conn.ReadMessage()
		if err != nil {
			var ce *websocket.CloseError
			switch {
			case errors.As(err, &ce) && ce.Code == websocket.CloseTryAgainLater:
				return outcome{kind: "busy", detail: ce.Text}
			case busy != "":
				return outcome{kind: "busy", detail: busy}
			case errors.As(err, &ce):
				return outcome{kind: "error", detail: fmt.Sprintf("close %d %s", ce.Code, ce.Text)}
			}
			return outcome{kind: "cut", detail: err.Error()}
		}
		if kind == websocket.BinaryMessage {
			n += len(data)
			continue
		}
		var msg struct{ Type, Error string }
		json.Unmarshal(data, &msg)
		switch msg.Type {
		case "done":
			return outcome{kind: "ok", bytes: n, took: time.Since(start)}
		case "busy":
			busy = msg.Error
		case "error":
			return outcome{kind: "error", detail: msg.Error}
		}
	}
}

func pct(xs []time.Duration, p float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	return xs[min(len(xs)-1, int(p*float64(len(xs))))]
}

func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// server is the flashstep server this run started.
type server struct {
	base string
	cmd  *exec.Cmd
}

// startServer runs the server binary on a free loopback port and waits for
// it to answer.
func startServer(ctx context.Context, bin string, memory int) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	// Every student dials from 127.0.0.1, a class behind one address: the
	// per-address cap on connections, which such a class lifts
	// (-conns-per-addr), is not what this measures.
	cmd := exec.CommandContext(ctx, bin, "-addr", addr, "-worker", "none", "-trace-memory", strconv.Itoa(memory), "-conns-per-addr", "0")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (make build first): %w", bin, err)
	}
	go func() { // its complaints, if any, go to ours
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(os.Stderr, "server:", sc.Text())
		}
	}()
	s := &server{base: "http://" + addr, cmd: cmd}
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if res, err := http.Get(s.base + "/healthz"); err == nil {
			res.Body.Close()
			return s, nil
		}
	}
	s.stop()
	return nil, errors.New("the server did not answer on " + addr + " within 20 s")
}

func (s *server) stop() {
	s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		s.cmd.Process.Kill()
	}
}

// rss is the server's resident memory, from /proc.
func (s *server) rss() uint64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// samplePeak samples the server's resident memory every 50 ms until the
// function it returns is called, which gives the peak.
func (s *server) samplePeak(ctx context.Context) func() uint64 {
	var peak atomic.Uint64
	peak.Store(s.rss())
	ctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if m := s.rss(); m > peak.Load() {
					peak.Store(m)
				}
			}
		}
	}()
	return func() uint64 { stop(); <-done; return peak.Load() }
}

// stats are the server's figures, from /debug/stats.
type stats struct {
	Rooms struct {
		Members   int   `json:"members"`
		Coalesced int64 `json:"coalesced"`
	} `json:"rooms"`
	Runs struct {
		Computed int64 `json:"computed"`
		Replayed int64 `json:"replayed"`
		Shared   int64 `json:"shared"`
		Cached   int64 `json:"cached"`
		Busy     int64 `json:"busy"`
	} `json:"runs"`
}

func (s *server) stats() (stats, error) {
	var st stats
	res, err := http.Get(s.base + "/debug/stats")
	if err != nil {
		return st, err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return st, fmt.Errorf("/debug/stats: %s", res.Status)
	}
	return st, json.NewDecoder(res.Body).Decode(&st)
}

type created struct{ Code, Token string }

func createRoom(base, query string) (created, error) {
	body, _ := json.Marshal(map[string]any{"page": "step", "query": query})
	res, err := http.Post(base+"/api/rooms", "application/json", bytes.NewReader(body))
	if err != nil {
		return created{}, err
	}
	defer res.Body.Close()
	var c created
	if res.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(res.Body)
		return c, fmt.Errorf("creating the room: %s %s", res.Status, b)
	}
	return c, json.NewDecoder(res.Body).Decode(&c)
}

type hello struct{ Query string }

// join connects a participant to the room and reads its hello.
func join(ctx context.Context, base, code, token string) (*websocket.Conn, hello, error) {
	var h hello
	u, _ := url.Parse(base)
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		return nil, h, errors.New("loadgen talks to loopback only")
	}
	hdr := http.Header{}
	if token != "" {
		hdr.Set("Cookie", "fs_presenter="+token)
	}
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, "ws"+strings.TrimPrefix(base, "http")+"/r/"+code+"/ws", hdr)
	if err != nil {
		return nil, h, err
	}
	if token != "" {
		return conn, h, nil
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, data, err := conn.ReadMessage()
	conn.SetReadDeadline(time.Time{})
	if err != nil || json.Unmarshal(data, &h) != nil || h.Query == "" {
		conn.Close()
		return nil, h, fmt.Errorf("no hello from the room: %v", err)
	}
	return conn, h, nil
}

type sizes struct{ Raw, Gzip, Deflate int }

func traceBytes(base, query string) (sizes, error) {
	var s sizes
	res, err := http.Get(base + "/api/trace/bytes?" + query)
	if err != nil {
		return s, err
	}
	defer res.Body.Close()
	return s, json.NewDecoder(res.Body).Decode(&s)
}
