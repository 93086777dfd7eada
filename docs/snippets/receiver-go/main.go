// A TourOps webhook receiver in Go: net/http and the verifier package (sdk/go).
//
//	TOUROPS_SIGNING_KEYS=whsec_... go run .     (PORT, default 4242; POST /webhooks)
//	TOUROPS_PUBLIC_KEYS=whpk_... go run .       (asymmetricSignatures: v1a, Ed25519)
//
// go.mod beside it uses the package by path: point its replace directive at your clone's sdk/go.
package main

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"

	"tourops.example/tourops"
)

func main() {
	var keys []string
	for _, name := range []string{"TOUROPS_SIGNING_KEYS", "TOUROPS_PUBLIC_KEYS"} {
		for _, key := range strings.Split(os.Getenv(name), ",") {
			if key != "" {
				keys = append(keys, key)
			}
		}
	}
	verifier := tourops.Verifier{Keys: keys}

	http.HandleFunc("/webhooks", func(w http.ResponseWriter, r *http.Request) {
		// The raw body, before any JSON decoding: the signature covers these bytes.
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		event, err := verifier.Verify(body, r.Header)
		if err != nil {
			if errors.Is(err, tourops.ErrTimestampOutsideTolerance) {
				log.Print("is this machine's clock right?")
			}
			fmt.Printf("refused: %v\n", err)
			http.Error(w, "refused", http.StatusBadRequest)
			return
		}
		// Acknowledge at once; do the work after (deduplicate on event.ID: deliveries can repeat).
		w.WriteHeader(http.StatusNoContent)
		fmt.Printf("verified %s %s\n", event.Type, event.ID)
	})

	port := os.Getenv("PORT")
	if port == "" {
		port = "4242"
	}
	listener, err := net.Listen("tcp", "127.0.0.1:"+port)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("listening on http://localhost:%s/webhooks\n", port)
	log.Fatal(http.Serve(listener, nil))
}
