package runner

// For the tests of package runner_test, which run the GPU runner through
// the server's shared computations (package runs, which imports runner).
var (
	StartFake = startFake
	Toy       = toy
)
