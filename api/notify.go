package api

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/slotwheel/slotwheel/api/internal/answer"
	"github.com/slotwheel/slotwheel/api/internal/auth"
	"github.com/slotwheel/slotwheel/api/internal/request"
	"github.com/slotwheel/slotwheel/engine"
)

// Webhook endpoints, their deliveries, WeChat subscribe-message templates and the venues' release
// modes: the admin side of "Events and webhooks" and "Venue operations" in docs/API.md.

// notifyRoutes are the admin's webhook endpoints, their deliveries and the WeChat templates; a
// venue's release mode is set here too, on the catalog.
type notifyRoutes struct {
	request.Reader
	notifications *engine.Notifications
	catalog       *engine.Catalog
}

type webhookRequest struct {
	URL        *string            `json:"url"`
	EventTypes []string           `json:"event_types"`
	VenueID    request.OptionalID `json:"venue_id"`
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

func (rt *notifyRoutes) createWebhook(c *gin.Context) {
	var req webhookRequest
	if !rt.Bind(c, &req) {
		return
	}
	if err := request.Required("url", req.URL != nil); err != nil {
		rt.Fail(c, err)
		return
	}
	w, err := rt.notifications.CreateWebhook(c.Request.Context(), auth.Actor(c), engine.WebhookInput{URL: *req.URL,
		EventTypes: req.EventTypes, VenueID: uint64(req.VenueID)})
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusCreated, toWebhookResponse(w))
}

func (rt *notifyRoutes) listWebhooks(c *gin.Context) {
	ws, err := rt.notifications.ListWebhooks(c.Request.Context(), auth.Actor(c))
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(ws, "", toWebhookResponse))
}

func (rt *notifyRoutes) deleteWebhook(c *gin.Context) {
	id, ok := rt.PathID(c)
	if !ok {
		return
	}
	w, err := rt.notifications.DeleteWebhook(c.Request.Context(), auth.Actor(c), id)
	if err != nil {
		rt.Fail(c, err)
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

func (rt *notifyRoutes) listDeliveries(c *gin.Context) {
	id, ok := rt.PathID(c)
	if !ok {
		return
	}
	limit, ok := rt.QueryLimit(c)
	if !ok {
		return
	}
	ds, next, err := rt.notifications.ListDeliveries(c.Request.Context(), auth.Actor(c), id, c.Query("status"), c.Query("cursor"), limit)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(ds, next, toDeliveryResponse(id)))
}

func (rt *notifyRoutes) retryDelivery(c *gin.Context) {
	id, ok := rt.PathID(c)
	if !ok || !rt.BindEmpty(c) {
		return
	}
	deliveryID, ok := request.ParseID(c.Param("delivery_id"))
	if !ok {
		rt.Fail(c, answer.ErrNotFound)
		return
	}
	d, err := rt.notifications.RetryDelivery(c.Request.Context(), auth.Actor(c), id, deliveryID)
	if err != nil {
		rt.Fail(c, err)
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

func (rt *notifyRoutes) setWechatTemplate(c *gin.Context) {
	var req wechatTemplateJSON
	if !rt.Bind(c, &req) {
		return
	}
	if err := request.FirstError(request.Required("event_type", req.EventType != nil), request.Required("template_id", req.TemplateID != nil),
		request.Required("data", req.Data != nil)); err != nil {
		rt.Fail(c, err)
		return
	}
	t, err := rt.notifications.SetWechatTemplate(c.Request.Context(), auth.Actor(c), engine.WechatTemplate{EventType: *req.EventType,
		TemplateID: *req.TemplateID, Page: req.Page, Data: *req.Data})
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toWechatTemplateResponse(t))
}

func (rt *notifyRoutes) listWechatTemplates(c *gin.Context) {
	ts, err := rt.notifications.WechatTemplates(c.Request.Context(), auth.Actor(c))
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toList(ts, "", toWechatTemplateResponse))
}

type releaseModeRequest struct {
	Mode *string `json:"mode"`
}

func (rt *notifyRoutes) setReleaseMode(c *gin.Context) {
	id, ok := rt.PathID(c)
	if !ok {
		return
	}
	var req releaseModeRequest
	if !rt.Bind(c, &req) {
		return
	}
	if err := request.Required("mode", req.Mode != nil); err != nil {
		rt.Fail(c, err)
		return
	}
	v, err := rt.catalog.SetReleaseMode(c.Request.Context(), auth.Actor(c), id, *req.Mode)
	if err != nil {
		rt.Fail(c, err)
		return
	}
	c.JSON(http.StatusOK, toVenueResponse(v))
}
