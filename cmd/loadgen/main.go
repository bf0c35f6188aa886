// Command loadgen measures a classroom under load: it starts a flashstep
// server on loopback, opens a room, connects students over websockets, has
// the presenter step at a fixed rate, and prints one line per figure:
//
//	loadgen [-server bin/server] [-students 300] [-rate 10] [-duration 30s]
//
// It talks to loopback only, opens a bounded number of connections, and
// stops by itself after the duration (plus at most a minute of setting up
// and draining). `make loadtest` runs it.
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

func run(args []string, out io.Writer) error {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	serverBin := fs.String("server", "bin/server", "the flashstep server binary to start on loopback")
	students := fs.Int("students", 300, "student connections (1–2000)")
	rate := fs.Float64("rate", 10, "presenter steps a second (0.1–50)")
	duration := fs.Duration("duration", 30*time.Second, "how long the presenter steps (1s–5m)")
	query := fs.String("run", "variant=flash2&n=64&d=16&br=16&bc=16&seed=1", "the run the room shows")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *students < 1 || *students > 2000:
		return fmt.Errorf("-students must be from 1 to 2000, got %d", *students)
	case *rate < 0.1 || *rate > 50:
		return fmt.Errorf("-rate must be from 0.1 to 50 a second, got %g", *rate)
	case *duration < time.Second || *duration > 5*time.Minute:
		return fmt.Errorf("-duration must be from 1s to 5m, got %v", *duration)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *duration+time.Minute)
	defer cancel()

	base, stop, err := startServer(ctx, *serverBin)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintf(out, "server              %s (%s), %d students, presenter %g steps/s for %v\n", base, *serverBin, *students, *rate, *duration)

	startMem, err := serverMemory(base)
	if err != nil {
		return err
	}
	room, err := createRoom(base, *query)
	if err != nil {
		return err
	}
	steps := int(float64(*rate) * duration.Seconds())
	sent := make([]atomic.Int64, steps+1) // when step k was sent, unix ns

	// The students: each records when each step arrived.
	type studentLog struct {
		recv       []int64 // by step: unix ns, 0 if never
		outOfOrder int
	}
	logs := make([]*studentLog, *students)
	var wg sync.WaitGroup
	conns := make([]*websocket.Conn, 0, *students)
	for i := range *students {
		conn, err := dial(ctx, base, room.Code, "")
		if err != nil {
			return fmt.Errorf("student %d: %w", i, err)
		}
		conns = append(conns, conn)
		l := &studentLog{recv: make([]int64, steps+1)}
		logs[i] = l
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
	pres, err := dial(ctx, base, room.Code, room.Token)
	if err != nil {
		return fmt.Errorf("presenter: %w", err)
	}
	go io.Copy(io.Discard, pres.UnderlyingConn()) // never read: the server coalesces its tallies
	_ = pres

	// Peak memory, sampled while the presenter steps.
	var peak atomic.Uint64
	peak.Store(startMem.HeapInuse)
	sampling, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	go func() {
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-sampling.Done():
				return
			case <-t.C:
				if m, err := serverMemory(base); err == nil && m.HeapInuse > peak.Load() {
					peak.Store(m.HeapInuse)
				}
			}
		}
	}()
	joined, _ := serverMemory(base)

	tick := time.NewTicker(time.Duration(float64(time.Second) / *rate))
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
	stopSampling()
	for _, c := range conns {
		c.Close()
	}
	pres.Close()
	wg.Wait()

	var delays []time.Duration
	lost, disorder := 0, 0
	for _, l := range logs {
		disorder += l.outOfOrder
		for k := 1; k <= steps; k++ {
			if l.recv[k] == 0 {
				lost++
				continue
			}
			delays = append(delays, time.Duration(l.recv[k]-sent[k].Load()))
		}
	}
	slices.Sort(delays)
	pct := func(p float64) time.Duration {
		if len(delays) == 0 {
			return 0
		}
		return delays[min(len(delays)-1, int(p*float64(len(delays))))]
	}
	tb, err := traceBytes(base, *query)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "step delay p50      %v\n", pct(0.50).Round(10*time.Microsecond))
	fmt.Fprintf(out, "step delay p99      %v\n", pct(0.99).Round(10*time.Microsecond))
	fmt.Fprintf(out, "step delay max      %v\n", pct(1).Round(10*time.Microsecond))
	fmt.Fprintf(out, "steps sent          %d to each of %d students (%d deliveries)\n", steps, *students, steps**students)
	fmt.Fprintf(out, "steps lost          %d\n", lost)
	fmt.Fprintf(out, "steps out of order  %d\n", disorder)
	fmt.Fprintf(out, "server heap start   %s (no room)\n", mib(startMem.HeapInuse))
	fmt.Fprintf(out, "server heap joined  %s (%d participants connected)\n", mib(joined.HeapInuse), joined.Members)
	fmt.Fprintf(out, "server heap peak    %s\n", mib(peak.Load()))
	fmt.Fprintf(out, "trace per student   %d bytes uncompressed (websocket), %d gzip (HTTP fallback, %.0f%%), %d per-frame deflate (%.0f%%); run %s\n",
		tb.Raw, tb.Gzip, 100*float64(tb.Gzip)/float64(max(tb.Raw, 1)), tb.Deflate, 100*float64(tb.Deflate)/float64(max(tb.Raw, 1)), *query)
	fmt.Fprintf(out, "trace for the class %s uncompressed, %s gzip\n", mib(uint64(tb.Raw**students)), mib(uint64(tb.Gzip**students)))
	return nil
}

func mib(n uint64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// startServer runs the server binary on a free loopback port and waits for
// it to answer.
func startServer(ctx context.Context, bin string) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.CommandContext(ctx, bin, "-addr", addr, "-worker", "none")
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		return "", nil, fmt.Errorf("starting %s (make build first): %w", bin, err)
	}
	go func() { // its complaints, if any, go to ours
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			fmt.Fprintln(os.Stderr, "server:", sc.Text())
		}
	}()
	stop := func() {
		cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
		}
	}
	base := "http://" + addr
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if res, err := http.Get(base + "/healthz"); err == nil {
			res.Body.Close()
			return base, stop, nil
		}
	}
	stop()
	return "", nil, errors.New("the server did not answer on " + addr + " within 20 s")
}

type memory struct {
	HeapInuse uint64 `json:"heap_inuse"`
	Members   int    `json:"members"`
}

func serverMemory(base string) (memory, error) {
	var m memory
	res, err := http.Get(base + "/debug/rooms")
	if err != nil {
		return m, err
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		return m, fmt.Errorf("/debug/rooms: %s", res.Status)
	}
	return m, json.NewDecoder(res.Body).Decode(&m)
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

func dial(ctx context.Context, base, code, token string) (*websocket.Conn, error) {
	u, _ := url.Parse(base)
	if ip := net.ParseIP(u.Hostname()); ip == nil || !ip.IsLoopback() {
		return nil, errors.New("loadgen talks to loopback only")
	}
	h := http.Header{}
	if token != "" {
		h.Set("Cookie", "fs_presenter="+token)
	}
	conn, _, err := websocket.DefaultDialer.DialContext(ctx, "ws"+strings.TrimPrefix(base, "http")+"/r/"+code+"/ws", h)
	return conn, err
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
