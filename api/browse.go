package api

import (
	"context"
	_ "embed"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/engine"
)

func (s *server) healthz(c *gin.Context) {
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

func (s *server) readyz(c *gin.Context) {
	ctx, cancel := context.WithTimeout(c.Request.Context(), 3*time.Second)
	defer cancel()
	if err := s.eng.Ready(ctx); err != nil {
		s.log.WarnContext(ctx, "not ready", "request_id", requestIDOf(c), "err", err)
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"status": "ok"})
}

//go:embed openapi.json
var openAPIDoc []byte

func serveOpenAPI(c *gin.Context) {
	c.Header("Cache-Control", "public, max-age=300")
	c.Data(http.StatusOK, "application/json; charset=utf-8", openAPIDoc)
}

func (s *server) listVenues(c *gin.Context) {
	vs, err := s.eng.ListVenues(c.Request.Context())
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(vs, "", toVenueResponse))
}

func (s *server) listResources(c *gin.Context) {
	venueID, ok := s.queryID(c, "venue_id")
	if !ok {
		return
	}
	rs, err := s.eng.ListResources(c.Request.Context(), venueID)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(rs, "", toResourceResponse))
}

func (s *server) listServices(c *gin.Context) {
	venueID, ok := s.queryID(c, "venue_id")
	if !ok {
		return
	}
	ss, err := s.eng.ListServices(c.Request.Context(), venueID)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(ss, "", toServiceResponse))
}

func (s *server) availability(c *gin.Context) {
	resourceID, ok := s.queryID(c, "resource_id")
	if !ok {
		return
	}
	serviceID, ok := s.queryID(c, "service_id")
	if !ok {
		return
	}
	if resourceID == 0 && serviceID == 0 {
		s.fail(c, badRequest("missing_parameter", "resource_id or service_id is required").withField("resource_id"))
		return
	}
	date, ok := s.queryDate(c, "date", true)
	if !ok {
		return
	}
	slots, err := s.eng.Availability(c.Request.Context(), engine.AvailabilityQuery{ResourceID: resourceID, ServiceID: serviceID, Date: date})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toAvailabilityResponse(slots))
}
