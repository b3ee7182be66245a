#!/usr/bin/env python3
"""Walks the official Apache RocketMQ Dashboard (2.1.0) against `petrel serve`: every page's
calls, as its UI makes them (the REST endpoints its React pages call, with the UI's parameters),
must answer with status 0 and the workload's data; the pages are then driven in headless Chromium
(Selenium) as a user drives them (a topic created and a test message sent through their forms;
messages found by topic and time, by key and by id, their detail opened and one resent to its
consumer; a dead letter found by id; a traced message's hops shown), each must show the
workload's names, and a screenshot is kept.

    scripts/dashboard-walk.py DASHBOARD_URL BROKER_ADDR SCREENSHOT_DIR TRACED_MSG_ID
    scripts/dashboard-walk.py --acl DASHBOARD_URL SCREENSHOT_DIR

The second form walks the ACL page against a broker with ACL 2.0 on (authentication and
authorization), the dashboard signing as that broker's first user: users and rules listed,
created and deleted.

Expects the workload of `ClientTest metrics` (topic MetricsTopic, push group cg_metrics with one
message in its DLQ, lite pull group cg_metrics_pull, producer group pg_metrics, and a message
traced from pg_trace to cg_trace) to be connected.
Prints `ok:` / `FAIL:` lines; exits 1 on any failure."""
import datetime
import json
import os
import re
import sys
import time
import urllib.parse
import urllib.request

failures = []


def call(method, path, params=None, body=None):
    url = base + path + ("?" + urllib.parse.urlencode(params) if params else "")
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


def check(what, method, path, params=None, body=None, expect=lambda d: True):
    """Calls one endpoint; its answer must have status 0 and `expect(data)` must hold."""
    try:
        answer = call(method, path, params, body)
    except Exception as e:  # noqa: BLE001 - any failure of the call is the check's failure
        failures.append(what)
        print(f"FAIL: {what}: {path}: {e}")
        return None
    data = answer.get("data")
    ok = answer.get("status") == 0
    try:
        ok = ok and expect(data)
    except Exception:  # noqa: BLE001 - an answer of the wrong shape fails the check
        ok = False
    if ok:
        print(f"ok: {what}")
    else:
        failures.append(what)
        print(f"FAIL: {what}: {path} answered {json.dumps(answer)[:600]}")
    return data


_browser = None


def browser():
    """One headless Chromium, driven by Selenium through Debian's chromedriver."""
    global _browser
    if _browser is None:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service

        options = Options()
        for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--window-size=1440,900"]:
            options.add_argument(arg)
        options.binary_location = "/usr/bin/chromium"
        _browser = webdriver.Chrome(options=options, service=Service("/usr/bin/chromedriver"))
    return _browser


def click_button(d, wait, label):
    from selenium.webdriver.common.by import By

    button = wait.until(lambda d: next((b for b in d.find_elements(By.TAG_NAME, "button") if b.text.strip() == label), None))
    button.click()


class Ui:
    """A user's moves on the dashboard's pages (Ant Design components), each waiting (20 s at
    most) for what it needs instead of sleeping."""

    def __init__(self):
        from selenium.webdriver.support.ui import WebDriverWait

        self.d = browser()
        self.wait = WebDriverWait(self.d, 20)

    def open(self, page, tab=None):
        """Loads a page afresh (no dialog of an earlier step left open); with `tab`, that tab of
        it. Returns the tab's pane (or the body)."""
        from selenium.webdriver.common.by import By

        self.d.get("about:blank")
        self.d.get(f"{base}/#/{page}")
        if tab is None:
            return self.wait.until(lambda d: d.find_element(By.TAG_NAME, "body"))
        button = self.wait.until(lambda d: self.shown(d.find_elements(By.CSS_SELECTOR, "[role=tab]"), tab))
        button.click()
        pane_id = button.get_attribute("aria-controls")
        return self.wait.until(lambda d: next(
            (p for p in d.find_elements(By.ID, pane_id) if p.is_displayed()), None))

    @staticmethod
    def shown(elements, text):
        return next((e for e in elements if e.is_displayed() and e.text.strip() == text), None)

    def press(self, scope, label):
        from selenium.webdriver.common.by import By

        self.wait.until(lambda d: self.shown(scope.find_elements(By.TAG_NAME, "button"), label)).click()

    def type_into(self, field, text):
        """Types `text` a key at a time: the dashboard's controlled inputs drop keys typed at
        Selenium's pace, so the value is checked, and retyped once if a key was lost."""
        from selenium.webdriver.common.keys import Keys

        for _ in range(2):
            field.send_keys(Keys.CONTROL, "a")
            field.send_keys(Keys.DELETE)
            for key in text:
                field.send_keys(key)
                time.sleep(0.02)
            if field.get_attribute("value") == text:
                return
        raise AssertionError(f"typed {text!r}, the field holds {field.get_attribute('value')!r}")

    def choose(self, scope, option, select_css=".ant-select"):
        """Picks `option` in a select of `scope`, typed into its search as a user narrows it."""
        from selenium.webdriver.common.by import By
        from selenium.webdriver.common.keys import Keys

        select = scope.find_element(By.CSS_SELECTOR, select_css)
        select.click()
        search = select.find_element(By.CSS_SELECTOR, ".ant-select-selection-search-input")
        if search.get_attribute("readonly") is None:
            self.type_into(search, option)
        self.wait.until(lambda d: self.shown(d.find_elements(By.CSS_SELECTOR, ".ant-select-item-option"), option)).click()
        if "ant-select-multiple" in select.get_attribute("class"):
            search.send_keys(Keys.ESCAPE)  # a multiple select stays open over the form

    def modal(self, text):
        """The open dialog that shows `text`."""
        from selenium.webdriver.common.by import By

        return self.wait.until(lambda d: next(
            (m for m in d.find_elements(By.CSS_SELECTOR, ".ant-modal") if m.is_displayed() and text in m.text), None))

    def close(self, dialog):
        self.press(dialog, "Close")
        self.wait.until(lambda d: not dialog.is_displayed())

    def notice(self, text):
        from selenium.webdriver.common.by import By

        self.wait.until(lambda d: any(
            text in n.text for n in d.find_elements(By.CSS_SELECTOR, ".ant-notification, .ant-message")))

    def row(self, pane, text):
        """The result row of `pane`'s table that shows `text`."""
        from selenium.webdriver.common.by import By

        return self.wait.until(lambda d: next(
            (r for r in pane.find_elements(By.CSS_SELECTOR, "tr.ant-table-row") if text in r.text), None))

    def shot(self, name):
        out = os.path.join(shots, f"dashboard-{name}.png")
        self.d.save_screenshot(out)
        return out


def page_text(d, limit=600):
    """What the page shows, on one line, for a failure's message: CI keeps the log, not the
    screenshot."""
    from selenium.webdriver.common.by import By

    try:
        return repr(" | ".join(d.find_element(By.TAG_NAME, "body").text.split("\n"))[:limit])
    except Exception as e:  # noqa: BLE001 - the browser itself may be gone
        return f"nothing ({type(e).__name__})"


def ui_step(what, name, steps):
    """Runs one user flow; any element that never appears, or a page that never shows what it
    must, fails the walk, with a screenshot of where it stopped."""
    ui = Ui()
    try:
        result = steps(ui)
        print(f"ok: {what} ({ui.shot(name)})")
        return result
    except Exception as e:  # noqa: BLE001 - a flow that cannot finish fails the walk
        failures.append(what)
        try:
            where = ui.shot(name)
        except Exception:  # noqa: BLE001 - the browser itself may be gone
            where = "none"
        print(f"FAIL: {what}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} (its screenshot: {where}; "
              f"it showed: {page_text(ui.d)})")
        return None


def ui_create_topic(ui, topic):
    """Topic page, Add / Update: cluster and broker picked, the name typed, Commit."""
    from selenium.webdriver.common.by import By

    ui.open("topic")
    ui.press(ui.d, "Add / Update")
    dialog = ui.modal("Add Topic")
    ui.choose(dialog, "DefaultCluster", ".ant-select:has(#clusterNameList)")
    ui.choose(dialog, "broker-a", ".ant-select:has(#brokerNameList)")
    ui.type_into(dialog.find_element(By.ID, "topicName"), topic)
    ui.press(dialog, "Commit")
    ui.notice("Topic operation successful")


def ui_send_message(ui, topic, tag, key, body):
    """Topic page, the topic's row, Send Massage (sic): tag, key and body typed, Commit. Returns
    the message id the send result shows."""
    from selenium.webdriver.common.by import By

    page = ui.open("topic")
    ui.press(ui.row(page, topic), "Send Massage")
    dialog = ui.modal(f"Send[{topic}]")
    ui.type_into(dialog.find_element(By.ID, "tag"), tag)
    ui.type_into(dialog.find_element(By.ID, "key"), key)
    ui.type_into(dialog.find_element(By.ID, "messageBody"), body)
    ui.press(dialog, "Commit")
    lines = ui.modal("SEND_OK").text.splitlines()
    return lines[lines.index("msgId") + 1]


def ui_find(ui, tab, topic, value, row_text):
    """Message page, by key or by id: the topic picked, the key or id typed, Search; the result
    row showing `row_text` (the detail dialog, for an id) is returned."""
    from selenium.webdriver.common.by import By

    pane = ui.open("message", tab)
    ui.choose(pane, topic)
    ui.type_into(pane.find_element(By.CSS_SELECTOR, "input.ant-input"), value)
    ui.press(pane, "Search")
    return ui.modal("Message Detail") if tab == "Message ID" else ui.row(pane, row_text)


def ui_by_time_then_resend(ui, topic, key, group):
    """Message page, by topic and time: the range typed into its pickers, Search, the row of
    `key` opened, and the message resent to `group` from the detail's tracking list."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    pane = ui.open("message", "Topic")
    ui.choose(pane, topic)
    stamp = "%Y-%m-%d %H:%M:%S"
    now = datetime.datetime.now()
    pickers = [i for i in pane.find_elements(By.TAG_NAME, "input") if i.get_attribute("placeholder") == "Select date"]
    for picker, at in zip(pickers, (now - datetime.timedelta(hours=1), now + datetime.timedelta(hours=1))):
        picker.click()
        ui.type_into(picker, at.strftime(stamp))
        picker.send_keys(Keys.ENTER)
    ui.press(pane, "Search")
    ui.row(pane, "normal-")  # the first page of the topic's messages
    # The workload's keys are `normal-N`: page until `key` shows.
    for _ in range(20):
        found = next((r for r in pane.find_elements(By.CSS_SELECTOR, "tr.ant-table-row") if key in r.text.split()), None)
        if found:
            break
        ui.d.find_element(By.CSS_SELECTOR, ".ant-pagination-next button, li.ant-pagination-next").click()
        time.sleep(0.3)
    else:
        raise AssertionError(f"{key} is on none of the pages")
    ui.press(found, "Message Detail")
    dialog = ui.modal(f"KEYS {key}")
    groups = re.findall(r"^Consumer group (\S+)$", dialog.text, re.M)
    resend = [b for b in dialog.find_elements(By.TAG_NAME, "button") if b.text == "Resend Message"]
    assert group in groups and len(resend) == len(groups), f"tracking list {groups}, {len(resend)} resend buttons"
    resend[groups.index(group)].click()
    ui.notice("Resend successful")


def ui_dlq_by_id(ui, group, msg_id):
    """DLQ page, by id: the group picked, the dead letter's id typed, Search; its row offers
    the detail, a resend and an export."""
    from selenium.webdriver.common.by import By

    pane = ui.open("dlqMessage", "Message ID")
    ui.choose(pane, group)
    ui.type_into(pane.find_element(By.CSS_SELECTOR, "input.ant-input"), msg_id)
    ui.press(pane, "Search")
    row = ui.wait.until(lambda d: next(iter(pane.find_elements(By.CSS_SELECTOR, "tr.ant-table-row")), None))
    buttons = [b.text for b in row.find_elements(By.TAG_NAME, "button")]
    assert buttons == ["Message Detail", "Resend Message", "export"], buttons


def ui_trace(ui, topic, msg_id):
    """Message trace page, by id: the topic picked, the id typed, Search, the row's trace
    detail: the producer's and the consumer group's hops, both successful."""
    from selenium.webdriver.common.by import By

    pane = ui.open("messageTrace", "Message ID")
    ui.choose(pane, topic)
    ui.type_into(pane.find_element(By.CSS_SELECTOR, "input.ant-input"), msg_id)
    ui.press(pane, "Search")
    ui.press(ui.row(pane, msg_id), "Message Trace Detail")
    # The detail is an overlay of the page's own (not a dialog); its timeline is drawn on a
    # canvas, the hop tables under it are text.
    ui.wait.until(lambda d: d.find_element(By.XPATH, "//h4[normalize-space()='Message Trace Detail']").is_displayed())
    ui.wait.until(lambda d: all(t in d.find_element(By.TAG_NAME, "body").text
                                for t in ("SubscriptionGroup: cg_trace", "success", f"( {msg_id}")))


def ui_producer(ui):
    """The producer page's form, as a user fills it: the topic picked in its select, the group
    typed (checked, as the form's controlled input may drop a key), then SEARCH; the table must
    show the workload's producer, a Java 5.5.0 client."""
    from selenium.webdriver.common.by import By

    body = ui.open("producer")
    ui.wait.until(lambda d: "PRODUCER_GROUP" in body.text)
    ui.choose(body, "MetricsTopic")
    group = ui.wait.until(lambda d: next(
        (i for i in body.find_elements(By.CSS_SELECTOR, "input.ant-input") if i.is_displayed()), None))
    ui.type_into(group, "pg_metrics")
    ui.press(body, "SEARCH")
    row = ui.row(body, "V5_5_0")
    assert "JAVA" in row.text, f"the producer's row shows {row.text!r}"


def screenshot(page, name, shows=(), click=None):
    """Opens `page` as a user does, clicks the button labelled `click` if given, waits (20 s at most) until the page shows every text of `shows`, and keeps
    a screenshot."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    out = os.path.join(shots, f"dashboard-{name}.png")
    d = browser()
    try:
        d.get(f"{base}/#/{page}")
        wait = WebDriverWait(d, 20)
        if click:
            click_button(d, wait, click)
        wait.until(lambda d: all(t in d.find_element(By.TAG_NAME, "body").text for t in shows))
        d.save_screenshot(out)
        print(f"ok: the {name} page shows {', '.join(shows) or 'itself'} ({out})")
    except Exception as e:  # noqa: BLE001 - a page that never shows its data fails the walk
        try:
            d.save_screenshot(out)
        except Exception:  # noqa: BLE001 - the browser itself may be gone
            pass
        failures.append(f"page {name}")
        print(f"FAIL: the {name} page did not show {shows}: {type(e).__name__} (its screenshot: {out}; "
              f"it showed: {page_text(d)})")


def acl_walk():
    """The ACL page: users and rules, created, listed and deleted through the dashboard."""
    where = {"clusterName": "DefaultCluster"}
    check("acl: the users", "GET", "/acl/users.query", where,
          expect=lambda d: any(u["username"] == "rocketmq" for u in d))
    check("acl: create a user", "POST", "/acl/createUser.do", body={
        "clusterName": "DefaultCluster",
        "userInfo": {"username": "dashuser", "password": "dash-password", "userType": "Normal", "userStatus": "enable"}})
    check("acl: the new user listed", "GET", "/acl/users.query", where,
          expect=lambda d: any(u["username"] == "dashuser" and u["userType"] == "Normal" for u in d))
    check("acl: create a rule", "POST", "/acl/createAcl.do", body={
        "clusterName": "DefaultCluster", "subject": "User:dashuser",
        "policies": [{"policyType": "Custom", "entries": [
            {"resource": ["Topic:MetricsTopic"], "actions": ["Pub", "Sub"], "sourceIps": ["127.0.0.1"], "decision": "Allow"}]}]})
    check("acl: the rule listed", "GET", "/acl/acls.query", {**where, "searchParam": "dashuser"},
          expect=lambda d: any(r["subject"] == "User:dashuser" and "MetricsTopic" in json.dumps(r) for r in d))
    screenshot("acl", "acl", shows=("rocketmq", "dashuser"), click="Confirm")
    check("acl: delete the rule", "DELETE", "/acl/deleteAcl.do", {**where, "subject": "User:dashuser", "resource": "Topic:MetricsTopic"})
    check("acl: the rule gone", "GET", "/acl/acls.query", {**where, "searchParam": "dashuser"},
          expect=lambda d: not any(r["subject"] == "User:dashuser" for r in d))
    check("acl: delete the user", "DELETE", "/acl/deleteUser.do", {**where, "username": "dashuser"})
    check("acl: the user gone", "GET", "/acl/users.query", where,
          expect=lambda d: not any(u["username"] == "dashuser" for u in d))


def main_walk():
    now_ms = int(time.time() * 1000)
    hour_ago_ms = now_ms - 3_600_000

    # Cluster page: brokers with their runtime figures, and a broker's configuration.
    check("cluster: the broker and its runtime figures", "GET", "/cluster/list.query",
          expect=lambda d: "msgPutTotalTodayNow" in d["brokerServer"]["broker-a"]["0"])
    check("cluster: the broker's configuration", "GET", "/cluster/brokerConfig.query", {"brokerAddr": broker},
          expect=lambda d: d["brokerName"] == "broker-a")

    # Topic page: the list (with system topics), a new topic, its route, stats and consumers, and a
    # test message sent from the page.
    check("topic: the list, system topics marked", "GET", "/topic/list.query",
          {"skipSysProcess": "false", "skipRetryAndDlq": "false"},
          expect=lambda d: "MetricsTopic" in d["topicList"] and "%SYS%TBW102" in d["topicList"])
    check("topic: the list with each topic's type", "GET", "/topic/list.queryTopicType",
          expect=lambda d: "MetricsTopic" in d["topicNameList"])
    # The topic is created and the test message sent through the pages' forms; the calls below
    # check what those forms did.
    ui_step("topic: a NORMAL topic created through Add / Update", "topic-create",
            lambda ui: ui_create_topic(ui, "DashboardTopic"))
    check("topic: the new topic's configuration", "GET", "/topic/examineTopicConfig.query", {"topic": "DashboardTopic"},
          expect=lambda d: d[0]["messageType"] == "NORMAL" and d[0]["writeQueueNums"] == 8)
    check("topic: its route", "GET", "/topic/route.query", {"topic": "DashboardTopic"},
          expect=lambda d: d["queueDatas"][0]["writeQueueNums"] == 8)
    sent_id = ui_step("topic: a test message sent through Send Massage", "topic-send",
                      lambda ui: ui_send_message(ui, "DashboardTopic", "dash-tag", "dash-key", "from the dashboard"))
    sent = {"msgId": sent_id} if sent_id else None
    check("topic: stats", "GET", "/topic/stats.query", {"topic": "DashboardTopic"},
          expect=lambda d: sum(o["maxOffset"] for o in d["offsetTable"].values()) == 1)
    check("topic: who consumes it", "GET", "/topic/queryTopicConsumerInfo.query", {"topic": "MetricsTopic"},
          expect=lambda d: "cg_metrics" in d["groupList"])
    check("topic: its consumers' progress", "GET", "/topic/queryConsumerByTopic.query", {"topic": "MetricsTopic"},
          expect=lambda d: "cg_metrics" in d)

    # Consumer page: groups with their clients, progress, connection, running info and settings.
    groups = check("consumer: the groups, online", "GET", "/consumer/groupList.query",
                   {"skipSysGroup": "false", "address": ""},
                   expect=lambda d: any(g["group"] == "cg_metrics" and g["count"] == 1 for g in d))
    check("consumer: a group's progress per queue", "GET", "/consumer/queryTopicByConsumer.query",
          {"consumerGroup": "cg_metrics", "address": broker},
          expect=lambda d: any(t["topic"] == "MetricsTopic" for t in d))
    conn = check("consumer: a group's connections", "GET", "/consumer/consumerConnection.query",
                 {"consumerGroup": "cg_metrics", "address": broker},
                 expect=lambda d: len(d["connectionSet"]) == 1)
    if conn:
        client = conn["connectionSet"][0]["clientId"]
        check("consumer: a client's running info", "GET", "/consumer/consumerRunningInfo.query",
              {"consumerGroup": "cg_metrics", "clientId": client, "jstack": "false"},
              expect=lambda d: "MetricsTopic" in json.dumps(d))
    check("consumer: a group's settings", "GET", "/consumer/examineSubscriptionGroupConfig.query",
          {"consumerGroup": "cg_metrics"},
          expect=lambda d: d[0]["subscriptionGroupConfig"]["groupName"] == "cg_metrics")
    check("consumer: create a group", "POST", "/consumer/createOrUpdate.do", body={
        "clusterNameList": ["DefaultCluster"], "brokerNameList": ["broker-a"],
        "subscriptionGroupConfig": {"groupName": "DashboardGroup", "consumeEnable": True, "consumeBroadcastEnable": True,
                                    "consumeMessageOrderly": False, "retryQueueNums": 1, "retryMaxTimes": 16,
                                    "brokerId": 0, "whichBrokerWhenConsumeSlowly": 1}})
    check("consumer: the new group's settings", "GET", "/consumer/examineSubscriptionGroupConfig.query",
          {"consumerGroup": "DashboardGroup"},
          expect=lambda d: d[0]["subscriptionGroupConfig"]["retryMaxTimes"] == 16)

    # Producer page.
    check("producer: a group's connections", "GET", "/producer/producerConnection.query",
          {"topic": "MetricsTopic", "producerGroup": "pg_metrics"},
          expect=lambda d: len(d["connectionSet"]) >= 1)

    # Message page: by topic and time, by key, by id, the detail, and a resend to a consumer.
    page = check("message: by topic and time", "POST", "/message/queryMessagePageByTopic.query", body={
        "topic": "MetricsTopic", "begin": hour_ago_ms, "end": now_ms + 60_000, "pageNum": 1, "pageSize": 20, "taskId": ""},
        expect=lambda d: len(d["page"]["content"]) > 0)
    by_key = check("message: by key", "GET", "/message/queryMessageByTopicAndKey.query",
                   {"topic": "DashboardTopic", "key": "dash-key"},
                   expect=lambda d: len(d) == 1 and d[0]["messageBody"] == "from the dashboard")
    if sent:
        check("message: by id, with its detail", "GET", "/message/viewMessage.query",
              {"msgId": sent["msgId"], "topic": "DashboardTopic"},
              expect=lambda d: d["messageView"]["messageBody"] == "from the dashboard")
    normal = next((m for m in (page or {}).get("page", {}).get("content", []) if m["messageBody"] == "normal-1"), None)
    if normal:
        check("message: resend to a consumer (consume directly)", "POST", "/message/consumeMessageDirectly.do",
              {"topic": "MetricsTopic", "consumerGroup": "cg_metrics", "msgId": normal["msgId"]},
              expect=lambda d: d["consumeResult"] == "CR_SUCCESS")
    else:
        failures.append("message: normal-1 in the page")
        print("FAIL: message: normal-1 was not in the topic's page")

    # The same, as a user does it on the message page.
    ui_step("message page: by key, the test message's row", "message-key",
            lambda ui: ui_find(ui, "Message Key", "DashboardTopic", "dash-key", "dash-tag"))
    if sent_id:
        ui_step("message page: by id, the test message's detail and body", "message-id",
                lambda ui: ui_find(ui, "Message ID", "DashboardTopic", sent_id, "").text.index("from the dashboard"))
    ui_step("message page: by topic and time, a message's detail, resent to cg_metrics", "message",
            lambda ui: ui_by_time_then_resend(ui, "MetricsTopic", "normal-2", "cg_metrics"))

    # DLQ page: the group's dead letters, and a resend.
    dlq = check("dlq: the group's dead letters", "POST", "/dlqMessage/queryDlqMessageByConsumerGroup.query", body={
        "topic": "%DLQ%cg_metrics", "begin": hour_ago_ms, "end": now_ms + 60_000, "pageNum": 1, "pageSize": 20,
        "taskId": ""}, expect=lambda d: any(m["messageBody"] == "dead" for m in d["page"]["content"]))
    if dlq:
        dead = next(m for m in dlq["page"]["content"] if m["messageBody"] == "dead")
        check("dlq: resend a dead letter", "POST", "/dlqMessage/batchResendDlqMessage.do",
              body=[{"topicName": "%DLQ%cg_metrics", "consumerGroup": "cg_metrics", "msgId": dead["msgId"]}],
              expect=lambda d: len(d) == 1)

    # Message trace page: the traced message's graph, its producer and its consumer group.
    check("trace: a message's send and consume hops", "GET", "/messageTrace/viewMessageTraceGraph.query",
          {"msgId": traced, "traceTopic": "RMQ_SYS_TRACE_TOPIC"},
          expect=lambda d: d["producerNode"]["groupName"] == "pg_trace"
          and any(n["subscriptionGroup"] == "cg_trace" for n in d["subscriptionNodeList"]))

    # The dead letter found by id on the DLQ page. (Its by-time search cannot be driven: the page
    # sends its initial range whatever a user picks, midnight to midnight; the call itself is
    # checked above.)
    if dlq:
        ui_step("dlq page: a dead letter found by id", "dlq",
                lambda ui: ui_dlq_by_id(ui, "cg_metrics", dead["msgId"]))
    ui_step("trace page: the traced message's send and consume hops", "trace",
            lambda ui: ui_trace(ui, "TraceTopic", traced))

    # Dashboard home and operations.
    check("dashboard: broker history", "GET", "/dashboard/broker.query", {"date": datetime.date.today().isoformat()},
          expect=lambda d: isinstance(d, dict))
    check("ops: the name servers", "GET", "/ops/homePage.query", expect=lambda d: len(d["namesvrAddrList"]) == 1)

    pages = [
        ("", "home", ("broker-a",)),
        ("cluster", "cluster", ("broker-a", broker)),
        ("topic", "topic", ("DashboardTopic",)),
        ("consumer", "consumer", ("cg_metrics", "cg_metrics_pull", "CONSUME_PASSIVELY")),
        ("ops", "ops", ("127.0.0.1:",)),
    ]
    for page, name, shows in pages:
        screenshot(page, name, shows)
    # A form driven: the producer page finds the workload's producer, a Java 5.5.0 client.
    ui_step("the producer page finds pg_metrics, a JAVA V5_5_0 client", "producer", ui_producer)



try:
    if sys.argv[1] == "--acl":
        base, shots = sys.argv[2], sys.argv[3]
        acl_walk()
    else:
        base, broker, shots, traced = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
        main_walk()
finally:
    if _browser is not None:
        _browser.quit()
print(f"{'FAIL' if failures else 'ok'}: the dashboard walk: {len(failures)} failures")
sys.exit(1 if failures else 0)
