package web

import (
	"flashstep/api"
	"net/http"

	"flashstep/kernels"
	"flashstep/kernels/ptx"
	"flashstep/templates"
)

// kernelsView joins what ptxas said of each kernel at build time with what
// the driver says of it on this server's GPU, if there is one.
func (s *Server) kernelsView() templates.KernelsView {
	v := templates.KernelsView{PTXHash: ptx.Hash()}
	hello, onGPU := s.runner.GPUHello()
	if onGPU {
		v.GPU = hello.GPU
	}
	for _, f := range kernels.Ptxas() {
		row := templates.KernelRow{Module: f.Module, Kernel: f.Kernel, Registers: f.Registers, StackBytes: f.StackBytes,
			SpillStores: f.SpillStores, Spills: f.SpillLoads}
		for _, k := range hello.Kernels {
			if k.Module == f.Module && k.Name == f.Kernel {
				row.Driver, row.DriverRegisters, row.LocalBytes, row.StaticShared, row.MaxThreads =
					true, k.Registers, k.LocalBytes, k.StaticShared, k.MaxThreads
			}
		}
		v.Rows = append(v.Rows, row)
	}
	return v
}

func (s *Server) kernelsPage(w http.ResponseWriter, r *http.Request) error {
	return render(w, r, http.StatusOK, templates.KernelsPage(s.page("Kernels", "kernels"), s.kernelsView()))
}

// kernelsAPI answers the kernel table; with a run's fields (variant, n, d,
// br, bc, causal) also the kernels that run launches on a GPU (Launched),
// so that the stepper names them without knowing any rung's symbols.
func (s *Server) kernelsAPI(w http.ResponseWriter, r *http.Request) error {
	v := s.kernelsView()
	v.Launched = api.Launched(r.URL.Query())
	writeJSON(w, http.StatusOK, v)
	return nil
}
