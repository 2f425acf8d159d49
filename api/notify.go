package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/engine"
)

// Webhook endpoints, their deliveries, WeChat subscribe-message templates and the venues' release
// modes: the admin side of "Events and webhooks" and "Venue operations" in docs/API.md.

type webhookRequest struct {
	URL        *string    `json:"url"`
	EventTypes []string   `json:"event_types"`
	VenueID    optionalID `json:"venue_id"`
}

type webhookResponse struct {
	WebhookID  string   `json:"webhook_id"`
	URL        string   `json:"url"`
	EventTypes []string `json:"event_types"`
	VenueID    *string  `json:"venue_id"`
	// Secret is shown once, in the answer that creates the endpoint.
	Secret    string `json:"secret,omitempty"`
	CreatedAt string `json:"created_at"`
}

func toWebhookResponse(w engine.Webhook) webhookResponse {
	out := webhookResponse{WebhookID: formatID(w.ID), URL: w.URL, EventTypes: w.EventTypes, Secret: w.Secret,
		CreatedAt: formatTime(w.CreatedAt)}
	if out.EventTypes == nil {
		out.EventTypes = []string{}
	}
	if w.VenueID != 0 {
		v := formatID(w.VenueID)
		out.VenueID = &v
	}
	return out
}

func (s *server) createWebhook(c *gin.Context) {
	var req webhookRequest
	if !s.bind(c, &req) {
		return
	}
	if err := required("url", req.URL != nil); err != nil {
		s.fail(c, err)
		return
	}
	w, err := s.eng.CreateWebhook(c.Request.Context(), actorOf(c), engine.WebhookInput{URL: *req.URL,
		EventTypes: req.EventTypes, VenueID: uint64(req.VenueID)})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toWebhookResponse(w))
}

func (s *server) listWebhooks(c *gin.Context) {
	ws, err := s.eng.ListWebhooks(c.Request.Context(), actorOf(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(ws, "", toWebhookResponse))
}

func (s *server) deleteWebhook(c *gin.Context) {
	id, ok := s.pathID(c)
	if !ok {
		return
	}
	w, err := s.eng.DeleteWebhook(c.Request.Context(), actorOf(c), id)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toWebhookResponse(w))
}

type deliveryResponse struct {
	DeliveryID    string  `json:"delivery_id"`
	WebhookID     string  `json:"webhook_id"`
	EventID       string  `json:"event_id"`
	EventType     string  `json:"event_type"`
	Subject       string  `json:"subject"`
	Status        string  `json:"status"`
	Attempts      int     `json:"attempts"`
	LastStatus    int     `json:"last_status"`
	LastError     string  `json:"last_error"`
	CreatedAt     string  `json:"created_at"`
	NextAttemptAt *string `json:"next_attempt_at"`
	DoneAt        *string `json:"done_at"`
}

func toDeliveryResponse(webhookID uint64) func(engine.Delivery) deliveryResponse {
	return func(d engine.Delivery) deliveryResponse {
		out := deliveryResponse{DeliveryID: formatID(d.ID), WebhookID: formatID(webhookID), EventID: d.EventID,
			EventType: d.EventType, Subject: d.Subject, Status: d.Status, Attempts: d.Attempts, LastStatus: d.LastStatus,
			LastError: d.LastError, CreatedAt: formatTime(d.CreatedAt)}
		if d.NextAttemptAt != nil {
			t := formatTime(*d.NextAttemptAt)
			out.NextAttemptAt = &t
		}
		if d.DoneAt != nil {
			t := formatTime(*d.DoneAt)
			out.DoneAt = &t
		}
		return out
	}
}

func (s *server) listDeliveries(c *gin.Context) {
	id, ok := s.pathID(c)
	if !ok {
		return
	}
	limit, ok := s.queryLimit(c)
	if !ok {
		return
	}
	ds, next, err := s.eng.ListDeliveries(c.Request.Context(), actorOf(c), id, c.Query("status"), c.Query("cursor"), limit)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(ds, next, toDeliveryResponse(id)))
}

func (s *server) retryDelivery(c *gin.Context) {
	id, ok := s.pathID(c)
	if !ok || !s.bindEmpty(c) {
		return
	}
	deliveryID, ok := parseID(c.Param("delivery_id"))
	if !ok {
		s.fail(c, errNotFound)
		return
	}
	d, err := s.eng.RetryDelivery(c.Request.Context(), actorOf(c), id, deliveryID)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toDeliveryResponse(id)(d))
}

type wechatTemplateJSON struct {
	EventType  *string            `json:"event_type"`
	TemplateID *string            `json:"template_id"`
	Page       string             `json:"page"`
	Data       *map[string]string `json:"data"`
}

type wechatTemplateResponse struct {
	EventType  string            `json:"event_type"`
	TemplateID string            `json:"template_id"`
	Page       string            `json:"page"`
	Data       map[string]string `json:"data"`
}

func toWechatTemplateResponse(t engine.WechatTemplate) wechatTemplateResponse {
	return wechatTemplateResponse{EventType: t.EventType, TemplateID: t.TemplateID, Page: t.Page, Data: t.Data}
}

func (s *server) setWechatTemplate(c *gin.Context) {
	var req wechatTemplateJSON
	if !s.bind(c, &req) {
		return
	}
	if err := firstError(required("event_type", req.EventType != nil), required("template_id", req.TemplateID != nil),
		required("data", req.Data != nil)); err != nil {
		s.fail(c, err)
		return
	}
	t, err := s.eng.SetWechatTemplate(c.Request.Context(), actorOf(c), engine.WechatTemplate{EventType: *req.EventType,
		TemplateID: *req.TemplateID, Page: req.Page, Data: *req.Data})
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toWechatTemplateResponse(t))
}

func (s *server) listWechatTemplates(c *gin.Context) {
	ts, err := s.eng.WechatTemplates(c.Request.Context(), actorOf(c))
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(ts, "", toWechatTemplateResponse))
}

type releaseModeRequest struct {
	Mode *string `json:"mode"`
}

func (s *server) setReleaseMode(c *gin.Context) {
	id, ok := s.pathID(c)
	if !ok {
		return
	}
	var req releaseModeRequest
	if !s.bind(c, &req) {
		return
	}
	if err := required("mode", req.Mode != nil); err != nil {
		s.fail(c, err)
		return
	}
	v, err := s.eng.SetReleaseMode(c.Request.Context(), actorOf(c), id, *req.Mode)
	if err != nil {
		s.fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toVenueResponse(v))
}
