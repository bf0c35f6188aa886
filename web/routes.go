package web

import (
	"net/http"

	"flashstep/classroom"
	"flashstep/client"
	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"
)

// routes is every route the server answers, in one place.
func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(middleware.Recoverer)
	r.Use(client.Resolve(s.trustedProxies)) // the address every per-address limit counts (package client)
	r.Use(s.logRequests)
	r.Use(securityHeaders)
	r.Use(s.bodyDeadline) // a body arrives within Deps.BodyTimeout, or 408 (bodies.go)
	r.Use(s.refuseWhileDraining)
	r.Use(middleware.GetHead) // HEAD answers as GET does, without the body (uptime monitors ask)

	r.Get("/", s.handlePage(s.home))
	r.Get("/step", s.handlePage(s.stepper))
	r.Get("/lessons", s.handlePage(s.lessonIndex))
	r.With(gzipped).Get("/lessons/{slug}", s.handlePage(s.lessonPage)) // formulas typeset in the page: lesson 13 is 340 KB of HTML, 40 KB gzipped
	r.Get("/glossary", s.handlePage(s.glossary))
	r.Get("/docs/{name}", s.handlePage(s.document))
	r.Get("/playground", s.handlePage(s.playgroundPage))
	r.Get("/kernels", s.handlePage(s.kernelsPage))
	r.With(gzipped).Get("/ladder", s.handlePage(s.ladderPage)) // every rung's source and diff: 400 KB of HTML, 70 KB gzipped
	r.Get("/sweep", s.handlePage(s.sweepPage))
	r.Get("/compare", s.handlePage(s.comparePage))
	r.Get("/lab", s.handlePage(s.labIndex))
	r.Get("/lab/{id}", s.handlePage(s.labPage))
	r.Get("/lab/{id}/solution", s.handlePage(s.labSolution))
	r.Get("/lab/{id}/grade.js", s.handlePage(s.labGrader))
	r.Get("/lab/{id}/recorded.json", s.handleAPI(s.labRecorded))
	r.Post("/api/lab/{id}/submissions", s.handleAPI(s.labSubmit))
	r.Get("/api/lab/submissions/{ticket}", s.handleAPI(s.labStatus))

	r.Get("/api/config", s.handleAPI(s.checkConfig))
	r.With(gzipped).Get("/api/trace", s.handleAPI(s.downloadTrace))
	r.Get("/api/trace/bytes", s.handleAPI(s.traceBytesAPI))
	r.Get("/api/kernels", s.handleAPI(s.kernelsAPI))
	r.Get("/api/source", s.handleAPI(s.kernelSource))
	r.Get("/api/memory", s.handleAPI(s.memoryPlan))
	r.Get("/api/traffic", s.handleAPI(s.trafficAPI))
	r.Get("/api/traffic/measured", s.handleAPI(s.trafficTable))
	r.Post("/api/sweeps", s.handleAPI(s.startSweep))
	r.Get("/api/sweeps/{id}", s.handleAPI(s.sweepJob))
	r.Delete("/api/sweeps/{id}", s.handleAPI(s.cancelSweep))
	r.Get("/api/sdpa", s.handleAPI(s.sdpaReference))
	r.Post("/api/checkpoints/{lesson}/{id}", s.handleAPI(s.gradeCheckpoint))
	r.Get("/api/loop", s.handleAPI(s.loopAPI))
	r.Get("/ws/trace", s.streamTrace)

	// The classroom (package classroom); a lab room's kernels come to the
	// lab's handler, under the room's path so that the student's cookie
	// comes with them.
	s.class.Routes(r, func(h classroom.Handler) http.HandlerFunc { return s.handlePage(h) },
		func(h classroom.Handler) http.HandlerFunc { return s.handleAPI(h) })
	r.Post("/r/{code}/lab/{id}/submissions", s.handleAPI(s.labSubmitInRoom))
	r.Get("/debug/stats", s.handleAPI(s.debugStats))

	r.Get("/healthz", s.health)
	r.Get("/static/*", http.StripPrefix("/static/", staticHandler(s.static)).ServeHTTP)
	r.NotFound(s.handlePage(func(w http.ResponseWriter, r *http.Request) error {
		return errNotFound
	}))
	return r
}
