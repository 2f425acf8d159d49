package api

import (
	"context"
	_ "embed"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/api/internal/request"
	"github.com/slotwheel/slotwheel/engine"
)

func healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

// readier is what /readyz asks of the engine.
type readier interface {
	Ready(ctx context.Context) error
}

func readyz(eng readier, out answer.Failer) gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeout(c.Request.Context(), 3*time.Second)
		defer cancel()
		if err := eng.Ready(ctx); err != nil {
			out.Log.WarnContext(ctx, "not ready", "request_id", answer.RequestIDOf(c), "err", err)
			out.Fail(c, err)
			return
		}
		c.JSON(http.StatusOK, gin.H{"status": "ok"})
	}
}

//go:embed openapi.json
var openAPIDoc []byte

func serveOpenAPI(c *gin.Context) {
	c.Header("Cache-Control", "public, max-age=300")
	c.Data(http.StatusOK, "application/json; charset=utf-8", openAPIDoc)
}

// browseRoutes are the catalog as anyone may browse it, without a token.
type browseRoutes struct {
	request.Reader
	catalog *engine.Catalog
}

func (rt *browseRoutes) listVenues(c *gin.Context) {
	vs, err := rt.catalog.ListVenues(c.Request.Context())
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(vs, "", toVenueResponse))
}

func (rt *browseRoutes) listResources(c *gin.Context) {
	venueID, ok := rt.QueryID(c, "venue_id")
	if !ok {
		return
	}
	rs, err := rt.catalog.ListResources(c.Request.Context(), venueID)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(rs, "", toResourceResponse))
}

func (rt *browseRoutes) listServices(c *gin.Context) {
	venueID, ok := rt.QueryID(c, "venue_id")
	if !ok {
		return
	}
	ss, err := rt.catalog.ListServices(c.Request.Context(), venueID)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(ss, "", toServiceResponse))
}

func (rt *browseRoutes) availability(c *gin.Context) {
	resourceID, ok := rt.QueryID(c, "resource_id")
	if !ok {
		return
	}
	serviceID, ok := rt.QueryID(c, "service_id")
	if !ok {
		return
	}
	if resourceID == 0 && serviceID == 0 {
		rt.Fail(c, answer.BadRequest("missing_parameter", "resource_id or service_id is required").WithField("resource_id"))
		return
	}
	date, ok := rt.QueryDate(c, "date", true)
	if !ok {
		return
	}
	slots, err := rt.catalog.Availability(c.Request.Context(), engine.AvailabilityQuery{ResourceID: resourceID, ServiceID: serviceID, Date: date})
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toAvailabilityResponse(slots))
}
