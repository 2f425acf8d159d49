package answer

import (
	"sort"
	"strconv"
	"strings"
)

// Languages of error messages.
const (
	LangEN = "en"
	LangZH = "zh-CN"
)

// Catalog holds the client-facing message of every error code the engine and the API use, in
// each language. A code missing in a language falls back to English, then to the error's own text.
// It is the one list of codes: TestCatalogListsEveryCode (api/codes_test.go) finds every code the sources
// can answer with and requires it here in each language, and requires openapi.json's Error.code enum
// to be exactly these keys.
var Catalog = map[string]map[string]string{
	LangEN: {
		// Input.
		"payment_id_conflict":     "This payment id was already used for another hold.",
		"already_waiting":         "You are already waiting for this time.",
		"too_many_holds":          "You have too many unpaid holds here; pay for one or give one up first.",
		"storage_unavailable":     "Bookings cannot be saved right now; please try again shortly.",
		"cancellation_closed":     "The booking has started and can no longer be cancelled.",
		"invalid_policy":          "A policy value is out of range.",
		"invalid_status":          "That is not one of the statuses this field or filter takes.",
		"invalid_release_mode":    "The release mode must be on, off or dry_run.",
		"invalid_url":             "The webhook URL must be an absolute http(s) URL without a user name, password or fragment.",
		"invalid_event_type":      "That is not an event type.",
		"invalid_template_id":     "The template id must be 1 to 128 characters.",
		"invalid_page":            "The page must be at most 512 characters.",
		"invalid_template_data":   "The template data must map template keys such as thing1 to booking fields.",
		"missing_venue_id":        "A venue_id is required.",
		"invalid_json":            "The body is not a single valid JSON object.",
		"unknown_field":           "The body has a field this route does not accept.",
		"invalid_type":            "A field has the wrong JSON type.",
		"body_too_large":          "The body is larger than 1 MiB.",
		"missing_field":           "A required field is missing.",
		"missing_parameter":       "A required query parameter is missing.",
		"invalid_id":              "An id must be a string of decimal digits.",
		"invalid_query":           "The query string cannot be read: a stray %, a broken escape or a semicolon.",
		"invalid_time":            "A time must be RFC 3339 with an offset, in the years 2000 to 9999, e.g. 2025-05-01T18:00:00+08:00.",
		"invalid_date":            "A date must be YYYY-MM-DD.",
		"invalid_window":          "The requested window is not valid: end must be after start, and a hold may last at most seven days.",
		"invalid_quantity":        "The quantity is out of range.",
		"invalid_capacity":        "The capacity is out of range.",
		"invalid_price":           "The price is out of range.",
		"invalid_amount":          "The amount is out of range.",
		"invalid_number":          "A number is out of range or not an integer.",
		"invalid_name":            "The name is empty or too long.",
		"invalid_kind":            "The kind is empty or too long.",
		"invalid_category":        "The category is too long.",
		"invalid_timezone":        "The time zone is not a known IANA name.",
		"invalid_slot_minutes":    "The slot length is out of range.",
		"invalid_horizon_days":    "The horizon is out of range.",
		"invalid_weekdays":        "Weekdays are ISO numbers from 1 (Monday) to 7 (Sunday), at least one.",
		"invalid_time_of_day":     "A time of day must be HH:MM, from 00:00 to 24:00.",
		"invalid_exception":       "A schedule exception is either closed or has both open and close.",
		"invalid_duration":        "The duration is out of range.",
		"invalid_buffer":          "A preparation or clean-up buffer is out of range.",
		"invalid_grace":           "The grace is out of range.",
		"invalid_resource_ids":    "A service needs one or more distinct resources.",
		"invalid_roles":           "A service takes resource_ids or roles, not both; at most 10 roles, each with a name of its own and at least one resource.",
		"invalid_resources":       "The resources do not fit the service: a service with roles takes one resource per role (in resources) and its bookings keep them when moved; any other service takes one resource_id.",
		"invalid_role":            "The role must be user, staff or admin.",
		"invalid_user_id":         "The user id is empty, too long, has characters that are not allowed, or names no person (the engine itself, or an erased user's pseudonym).",
		"invalid_code":            "The code is empty or too long.",
		"invalid_payment_id":      "The payment id is empty or too long.",
		"invalid_hold_id":         "The hold id is empty or is not a hold id.",
		"invalid_cursor":          "The cursor is not valid.",
		"invalid_limit":           "The limit is out of range.",
		"missing_start":           "A start time is required.",
		"missing_end":             "An end time is required for a resource hold.",
		"missing_resource_id":     "A resource_id or service_id is required.",
		"invalid_end":             "The end must be the start plus the service's duration, or omitted.",
		"invalid_opening":         "An opening's close must be after its open.",
		"overlapping_openings":    "Two openings of one weekday overlap (or a weekday is listed twice).",
		"schedule_conflict":       "The new schedule would close hours under confirmed bookings or put more units in a slot than it has; cancel them (cancel_affected) or move them first.",
		"invalid_checkin_code":    "This is not a check-in code.",
		"duplicate_exception":     "Two schedule exceptions name the same date.",
		"unknown_venue":           "No such venue.",
		"unknown_resource":        "No such resource.",
		"unknown_service":         "No such service.",
		"resource_not_in_service": "That resource does not deliver this service.",
		"invalid_idempotency_key": "An Idempotency-Key must be 1 to 255 visible ASCII characters, sent once.",
		"idempotency_key_reused":  "This Idempotency-Key was already used with another request body.",
		"request_in_progress":     "A request with this Idempotency-Key is still running; retry shortly.",
		// Authentication and routing.
		"unauthorized":          "Log in first: a valid Bearer token is required.",
		"forbidden":             "You are not allowed to do this.",
		"not_found":             "No such object.",
		"method_not_allowed":    "This method is not allowed on this path.",
		"wechat_login_failed":   "WeChat log-in failed; please try again.",
		"wechat_not_configured": "WeChat log-in is not configured on this server.",
		"wechat_unavailable":    "WeChat could not be reached; please try again.",
		"bad_signature":         "The payment notification's signature is not valid.",
		"stale_signature":       "The payment notification's timestamp is more than 5 minutes off.",
		// Booking rules.
		"slot_full":             "Sorry, that time is fully booked.",
		"slot_closed":           "The resource is closed for part of that time.",
		"slot_past":             "That time has already passed.",
		"off_grid":              "The start or end is not on the resource's slot grid.",
		"too_far":               "That time is beyond how far ahead bookings are taken.",
		"too_soon":              "That time is too soon to book.",
		"hold_expired":          "The hold expired and its time is gone.",
		"hold_not_active":       "The hold is no longer active.",
		"invalid_transition":    "The booking's status does not allow that.",
		"too_early":             "Check-in is not open yet.",
		"too_late":              "The booking was already released.",
		"restore_window_closed": "It is too late to restore this booking.",
		"amount_mismatch":       "The amount paid differs from the hold's amount.",
		"resource_inactive":     "The resource cannot be booked.",
		"confirm_in_progress":   "The hold is being confirmed; retry shortly.",
		"backend_unavailable":   "The service is busy; please try again.",
		"reschedule_closed":     "It is too late to move this booking.",
		"reschedule_limit":      "This booking has been moved as many times as allowed.",
		"price_differs":         "The new time costs a different amount from what was paid.",
		"invalid_days":          "days must be 1 to 7, counted from a date.",
		"invalid_refund":        "The refund must be full or policy.",
		"capacity_conflict":     "Bookings already take more units than the new capacity; cancel them (cancel_affected) or move them first.",
		"invalid_reason":        "The reason must be text of at most 160 characters.",
		"reason_required":       "Give a reason: it is kept with the action (a booking's history, a user's unfreeze).",
		"approval_lapsed":       "The approval deadline has passed; the booking is being declined.",
		"not_pending_approval":  "This booking is not waiting for approval.",
		"awaiting_approval":     "This booking is waiting for the venue's approval.",
		"account_frozen":        "New holds are paused for this account after too many no-shows.",
		"rate_limited":          "Too many requests; please slow down and try again shortly.",
		"internal":              "Something went wrong on our side.",

		// Payments with WeChat Pay.
		"wechatpay_not_configured": "WeChat Pay is not configured on this server.",
		"wechat_login_required":    "Log in through WeChat to pay with WeChat Pay.",
		"bad_notification":         "The payment notification could not be verified or decrypted.",
	},
	LangZH: {
		"payment_id_conflict":     "该支付单号已用于另一笔预留。",
		"already_waiting":         "您已在该时段的候补队列中。",
		"too_many_holds":          "您在本场馆的未支付预留过多，请先支付或取消一个。",
		"storage_unavailable":     "暂时无法保存预约，请稍后重试。",
		"cancellation_closed":     "预约已开始，无法取消。",
		"invalid_policy":          "规则数值超出范围。",
		"invalid_status":          "不是该字段或筛选条件可用的状态值。",
		"invalid_release_mode":    "释放模式只能是 on、off 或 dry_run。",
		"invalid_url":             "Webhook 地址必须是完整的 http(s) 地址，且不含用户名、密码或片段。",
		"invalid_event_type":      "不是有效的事件类型。",
		"invalid_template_id":     "模板 ID 须为 1 到 128 个字符。",
		"invalid_page":            "页面路径最多 512 个字符。",
		"invalid_template_data":   "模板数据须将 thing1 等模板字段映射到预约字段。",
		"missing_venue_id":        "缺少 venue_id。",
		"invalid_json":            "请求体不是一个有效的 JSON 对象。",
		"unknown_field":           "请求体包含此接口不接受的字段。",
		"invalid_type":            "字段的 JSON 类型不正确。",
		"body_too_large":          "请求体超过 1 MiB。",
		"missing_field":           "缺少必填字段。",
		"missing_parameter":       "缺少必填的查询参数。",
		"invalid_id":              "ID 必须是由数字组成的字符串。",
		"invalid_query":           "查询字符串无法解析：含有多余的 %、错误的转义或分号。",
		"invalid_time":            "时间必须是带时区偏移的 RFC 3339 格式，年份在 2000 到 9999 之间，例如 2025-05-01T18:00:00+08:00。",
		"invalid_date":            "日期必须是 YYYY-MM-DD 格式。",
		"invalid_window":          "时间段无效：结束时间必须晚于开始时间，且一次预留最长七天。",
		"invalid_quantity":        "数量超出范围。",
		"invalid_capacity":        "容量超出范围。",
		"invalid_price":           "价格超出范围。",
		"invalid_amount":          "金额超出范围。",
		"invalid_number":          "数值超出范围或不是整数。",
		"invalid_name":            "名称为空或过长。",
		"invalid_kind":            "类型为空或过长。",
		"invalid_category":        "类别过长。",
		"invalid_timezone":        "时区不是有效的 IANA 名称。",
		"invalid_slot_minutes":    "时段长度超出范围。",
		"invalid_horizon_days":    "可预约天数超出范围。",
		"invalid_weekdays":        "星期须为 1（周一）到 7（周日），至少一个。",
		"invalid_time_of_day":     "时刻必须是 HH:MM 格式，范围 00:00 到 24:00。",
		"invalid_exception":       "例外日期要么全天关闭，要么同时给出开始和结束时刻。",
		"invalid_duration":        "服务时长超出范围。",
		"invalid_buffer":          "准备或清理时间超出范围。",
		"invalid_grace":           "宽限时间超出范围。",
		"invalid_resource_ids":    "服务需要一个或多个不重复的资源。",
		"invalid_roles":           "服务只能指定 resource_ids 或 roles 之一；最多 10 个角色，每个角色名称唯一且至少包含一个资源。",
		"invalid_resources":       "所选资源与服务不符：多角色服务须按角色指定资源（resources），改期时资源保持不变；其他服务只能指定一个 resource_id。",
		"invalid_role":            "角色必须是 user、staff 或 admin。",
		"invalid_user_id":         "用户 ID 为空、过长、包含不允许的字符，或不代表任何人（系统自身，或已删除用户的化名）。",
		"invalid_code":            "代码为空或过长。",
		"invalid_payment_id":      "支付单号为空或过长。",
		"invalid_hold_id":         "预留 ID 为空或格式不正确。",
		"invalid_cursor":          "分页游标无效。",
		"invalid_limit":           "每页数量超出范围。",
		"missing_start":           "开始时间为必填项。",
		"missing_end":             "按资源预约时必须指定结束时间。",
		"missing_resource_id":     "必须指定 resource_id 或 service_id。",
		"invalid_end":             "结束时间必须等于开始时间加服务时长，或不填。",
		"invalid_opening":         "营业时段的结束时刻必须晚于开始时刻。",
		"overlapping_openings":    "同一天的营业时段重叠（或某个星期几重复出现）。",
		"schedule_conflict":       "新的排期会关闭已有预约的时段或使已订数量超过容量，请先取消（cancel_affected）或调整相关预约。",
		"invalid_checkin_code":    "这不是有效的签到码。",
		"duplicate_exception":     "有两个例外设置指向同一日期。",
		"unknown_venue":           "场馆不存在。",
		"unknown_resource":        "资源不存在。",
		"unknown_service":         "服务不存在。",
		"resource_not_in_service": "该资源不提供此服务。",
		"invalid_idempotency_key": "Idempotency-Key 必须是 1 到 255 个可见 ASCII 字符，且只能发送一次。",
		"idempotency_key_reused":  "该 Idempotency-Key 已用于另一个请求体。",
		"request_in_progress":     "使用该 Idempotency-Key 的请求仍在处理中，请稍后重试。",
		"unauthorized":            "请先登录：需要有效的 Bearer 令牌。",
		"forbidden":               "您无权执行此操作。",
		"not_found":               "对象不存在。",
		"method_not_allowed":      "此路径不支持该方法。",
		"wechat_login_failed":     "微信登录失败，请重试。",
		"wechat_not_configured":   "服务器未配置微信登录。",
		"wechat_unavailable":      "暂时无法连接微信，请重试。",
		"bad_signature":           "支付通知签名无效。",
		"stale_signature":         "支付通知的时间戳相差超过 5 分钟。",
		"slot_full":               "抱歉，该时段已约满。",
		"slot_closed":             "该资源在所选时段内有部分时间不开放。",
		"slot_past":               "该时段已经结束。",
		"off_grid":                "开始或结束时间不在该资源的时段网格上。",
		"too_far":                 "该时段超出可预约的范围。",
		"too_soon":                "该时段距离现在太近，无法预约。",
		"hold_expired":            "预留已过期，时段已被释放。",
		"hold_not_active":         "该预留已失效。",
		"invalid_transition":      "当前预约状态不允许此操作。",
		"too_early":               "尚未到签到时间。",
		"too_late":                "该预约已被释放。",
		"restore_window_closed":   "已超过恢复预约的时限。",
		"amount_mismatch":         "支付金额与预留金额不一致。",
		"resource_inactive":       "该资源暂不可预约。",
		"confirm_in_progress":     "预留正在确认中，请稍后重试。",
		"backend_unavailable":     "服务繁忙，请稍后重试。",
		"reschedule_closed":       "已过改期截止时间，无法改期。",
		"reschedule_limit":        "该预约的改期次数已达上限。",
		"price_differs":           "新时段的价格与已支付金额不同。",
		"invalid_days":            "days 须为 1 到 7，并与 date 一起使用。",
		"invalid_refund":          "退款方式须为 full（全额）或 policy（按规则）。",
		"capacity_conflict":       "已有预约占用的数量超过新的容量，请先取消（cancel_affected）或调整相关预约。",
		"invalid_reason":          "原因须为不超过 160 个字的文本。",
		"reason_required":         "请填写原因，它会随此操作记录在案（预约历史或解冻记录）。",
		"approval_lapsed":         "审核时限已过，该预约将被自动拒绝。",
		"not_pending_approval":    "该预约不在待审核状态。",
		"awaiting_approval":       "该预约正在等待场馆审核。",
		"account_frozen":          "因多次爽约，该账户暂时无法预留。",
		"rate_limited":            "请求过于频繁，请稍后重试。",
		"internal":                "服务器内部错误。",

		// Payments with WeChat Pay.
		"wechatpay_not_configured": "服务器未配置微信支付。",
		"wechat_login_required":    "请先通过微信登录，再使用微信支付。",
		"bad_notification":         "支付通知无法验证或解密。",
	},
}

// Message is the client-facing message of code in lang, naming field when one is to blame.
func Message(lang, code, fallback, field string) string {
	msg, ok := Catalog[lang][code]
	if !ok {
		lang = LangEN
		if msg, ok = Catalog[LangEN][code]; !ok {
			msg = fallback
		}
	}
	if field == "" {
		return msg
	}
	if lang == LangZH {
		return msg + "（字段：" + field + "）"
	}
	return msg + " (field: " + field + ")"
}

// Language picks the best supported language of an Accept-Language header (RFC 9110 §12.5.4),
// English when nothing matches.
func Language(header string) string {
	if header == "" {
		return LangEN // what the loop below makes of it, without its allocations
	}
	type choice struct {
		lang string
		q    float64
	}
	var choices []choice
	for _, part := range strings.Split(header, ",") {
		tag, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		tag = strings.ToLower(strings.TrimSpace(tag))
		q := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				continue
			}
			q = f
		}
		if q <= 0 {
			continue
		}
		switch {
		case tag == "zh" || strings.HasPrefix(tag, "zh-"):
			choices = append(choices, choice{LangZH, q})
		case tag == "en" || strings.HasPrefix(tag, "en-"):
			choices = append(choices, choice{LangEN, q})
		}
	}
	if len(choices) == 0 {
		return LangEN
	}
	sort.SliceStable(choices, func(a, b int) bool { return choices[a].q > choices[b].q })
	return choices[0].lang
}
