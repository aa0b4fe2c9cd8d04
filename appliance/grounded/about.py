"""The appliance itself: who it is (its name, what it is, its model and version) and what it can do here.

"What can you do" is answered from the running config, not from a model's idea of assistants: the
devices by room, the chat channels that are on, the schedules, the tools, and whether the cloud may
be asked. The name is the one in SOUL.md (the owner may have renamed it there), else ``agent.name``.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence

from appliance import __version__
from appliance.grounded.base import Answer, Ask, Facts, TopicDefaults
from appliance.grounded.base import said as _said
from appliance.hardware.device_info import DeviceInfo

_CHANNEL_NAMES = {"email": "e-mail", "whatsapp": "WhatsApp", "telegram": "Telegram", "discord": "Discord"}

_WHO = re.compile(
    r"^(?:(?:hi|hello|hey)[, ]+)?(?:who|what) (?:are|r) (?:you|u)\b(?! (?:doing|up to|thinking|reading|watching|"
    r"talking|going|looking|saying|working|planning|able|capable|good))"
    r"|^who am i (?:talking|speaking|chatting) (?:to|with)\b|^what(?:'s| is) your name\b"
    r"|^(?:do you|have you got) (?:have )?a name\b|^what should i call you\b"
    r"|^(?:introduce yourself|tell me about yourself)\b"
    r"|^are you (?:a |an )?(?:real )?(?:robot|bot|ai|human|person|machine|computer|program)\b"
    # "am i chatting to an actual human or a computer programme here" (the thirteenth blind set)
    r"|^(?:am i|are we) (?:talking|speaking|chatting|texting) (?:to|with) (?:a |an )?(?:real |actual )?"
    r"(?:human|person|robot|bot|ai|machine|computer|program|programme)\b"
    r"|^what (?:language )?model (?:are you|do you (?:use|run))\b|^which (?:language )?model (?:are you|do you)\b"
    r"|^what(?:'s| is) the name of (?:the |your )?(?:language |ai )?model\b"
    r"|^what version (?:are you|is this)\b|^which version\b|^(?:what|which) (?:software )?version (?:is|are)\b"
    r"|^(?:wait |so |hang on )?are you (?:just |really |actually |secretly |basically )?"
    r"(?:chatgpt|siri|alexa|google|gpt|claude|gemini|copilot|cortana)\b"
    r"|^(?:do|are) you (?:run|running|live|work|hosted)(?: on| in)? (?:the )?"
    r"(?:internet|cloud|online|here|locally|at home)\b"
    r"|^where (?:do you (?:run|live)|are you (?:running|hosted))\b"
    r"|^what(?:'s| is) (?:the name of )?your (?:language )?model(?:'s name)?\b",
)
_OTHER_ASSISTANT = re.compile(
    r"\bare you (?:just |really |actually |secretly |basically )?"
    r"(?:chatgpt|siri|alexa|google|gpt|claude|gemini|copilot|cortana)\b"
)
_KNOWN_TOOL_WORDS = frozenset(
    {"calculator", "shell", "web_search", "web_fetch", "search", "browser", "terminal", "memory"}
)
_CAN = re.compile(
    r"^what (?:can|could) (?:you|u) do\b|^what are you (?:able to|capable of)\b|^how can you help\b"
    r"|^what (?:sort|sorts|kind|kinds|type|types) of (?:things|stuff|jobs|tasks) (?:can|could) (?:you|u) (?:help|do)\b"
    r"|^what do you do\b|^help$|^what (?:else )?can i ask (?:you)?\b"
    r"|^(?:which|what) (?:smart )?(?:devices|things|lights|switches|sensors|gadgets|appliances|stuff|kit)"
    r" (?:do|can|could) you (?:actually |really |even |currently )?(?:control|switch|see|read|have|operate|run)\b"
    r"|^(?:which|what) devices (?:are there|have you got|are connected)\b|^list (?:the |all |your )?devices\b"
    r"|^what(?:'s| is) connected\b|^(?:can|do) you (?:control|switch|turn on|see) (?:anything|devices|lights)\b"
    r"|^what (?:smart )?(?:devices|gadgets|things) (?:have i got|do i have|are there|have you got)\b"
    r"|^what (?:can|do) you (?:control|switch|operate)\b|^(?:can|could) you (?:turn|switch) (?:things|stuff|devices)\b",
)
_CHATS = re.compile(r"^(?:which|what) (?:chat )?(?:apps|channels|ways|chats)\b.*\b(?:talk|reach|message|chat|use)\b")
_CLOUD = re.compile(
    r"^(?:can|do|will|may) you (?:use|ask|call|go to|send (?:\w+ )?to) (?:the )?(?:cloud|internet|chatgpt|openai)\b"
)
_TOOLS = re.compile(
    r"^(?:what|which) tools (?:do you have|can you use|have you got)\b"
    r"|^(?:do you have|have you got|can you use) (?:a |an |the )?(?P<tool>[a-z_ ]+?)(?: tool)?$"
)
# "are you able to remind me about things?", "could you switch the porch light on if I asked?"
_ABLE = re.compile(
    r"^(?:so )?(?P<hypo>are you able to|would you be able to|do you know how to|is it possible (?:for you )?to"
    r"|can you(?: actually| really)?|could you(?: actually| really)?)"
    r" (?P<x>.+?)(?P<if> (?:for me )?if i (?:asked|wanted|told you)(?: (?:you )?to)?| for me)?(?: or not)?$"
)
# "remind me to ...", not "remind me of the name of our dentist" (a question of memory)
_REMINDING = re.compile(
    r"^(?:remind me(?! (?:of|what|who|whom|which|where|how|why)\b)|set (?:up )?(?:a |an )?(?:reminders?|alarms?"
    r"|timers?|schedules?)|schedule)\b"
)
_WEATHERING = re.compile(r"^(?:check|tell me|get|look up|give me) (?:the )?(?:weather|forecast)\b")
_REMEMBERING = re.compile(r"^(?:remember|keep|store|note) (?:things|stuff|notes|facts|what i (?:tell|say))\b")
_SWITCHING = re.compile(
    r"^(?:switch|turn|put|dim|control|operate|open|close|shut|lock|unlock)(?: (?:on|off|up|down))?"
    r" (?:the |my |our )?(?!an? )(?P<thing>[a-z ]+?)(?: (?:on|off|up|down)(?: (?:and|or) (?:on|off|up|down))?)?$"
)
# what it cannot do from here: no shop, no phone, no payments
_CANNOT = re.compile(r"^(?:order|buy|book|pay for|shop for|purchase|reserve)\b")
# "play some music in the kitchen": no speaker or media player is among the devices
_PLAY = re.compile(
    r"^(?:(?:can|could|would) you )?(?:please )?(?:play|put on|put|stream) (?:me )?(?:some |a |the |my |any )?"
    r"(?:music|songs?|radio|podcasts?|playlist|album|tunes|audiobook)\b"
)
_WILL_REMEMBER = re.compile(
    r"^(?:if i tell you (?:something|things|stuff),? )?(?:will|would|can|do) you (?:remember|keep|store) (?:it|things"
    r"|stuff|what i (?:tell|say)(?: you)?)(?: later(?: on)?| for later| next time)?$"
)
# "does what I type here get sent to some server in the cloud?": where what is said goes
_LEAVES_PI = re.compile(
    r"^(?:does|do|will|is|are) (?:what i (?:type|say|write)|my (?:messages|data|chats?|questions))(?: here)?"
    r" (?:get |go |get sent |sent |leave |uploaded |shared )?.*\b(?:cloud|server|internet|online|openai|google)\b"
)
_CONNECTED = re.compile(
    r"^(?:are you|is it) (?:connected|linked|on|hooked up|set up) (?:to|with|for) "
    r"(?P<channel>telegram|discord|slack|whatsapp|e-?mail)$"
    r"|^can i (?:talk|write|message|reach) (?:to )?you (?:on|over|by|via|through) "
    r"(?P<channel2>telegram|discord|slack|whatsapp|e-?mail)$"
)
_LEAVE = re.compile(
    r"^(?:do|does|will|would) (?:my )?(?:questions|messages|data|chats?|words) (?:ever )?(?:leave|go out of)"
    r" (?:the house|home|the pi|my home)$"
)
_ABOUT_DEVICES = re.compile(
    r"\b(?:devices?|lights?|switch(?:es)?|sensors?|connected|control|gadgets?|appliances?|operate)\b"
)
_SOUL_NAME = re.compile(r"\bYou are ([A-Z][\w-]{0,30})\b")


def assistant_name(facts: Facts) -> str:
    """The assistant's name: SOUL.md's "You are NAME", else the config's agent.name."""
    found = None
    if facts.workspace is not None:
        try:
            found = _SOUL_NAME.search((facts.workspace / "SOUL.md").read_text(encoding="utf-8"))
        except OSError:
            found = None
    return found.group(1) if found else facts.config.agent.name


class Self(TopicDefaults):
    """Who the assistant is: its name, what it is, which model and version."""

    kind: str = "self"
    overview: str = "who"

    def match(self, text: str) -> Ask | None:
        """An Ask for questions about the assistant itself."""
        said = _said(text)
        if _WHO.search(said):
            what = "model" if "model" in said else "version" if "version" in said else "who"
            what = "who" if re.search(r"\b(?:your|ur) name\b", said) else what  # "your name and your model": both
            if re.search(r"\b(?:internet|cloud|online|locally|at home|where do you|where are you)\b", said):
                what = "where"
            return Ask(self.kind, what, text=text)
        return None

    async def answer(self, ask: Ask, facts: Facts) -> Answer | None:
        """Its name, what it is, the model and version (all from the config and the running code)."""
        name = assistant_name(facts)
        model = facts.model_name or "no local model"
        cloud = "and asks a cloud model only when you allow it" if facts.cloud_allowed else "and never the cloud"
        if ask.what == "model":
            text = f"I run {model} here on the Pi, {cloud}."
        elif ask.what == "version":
            text = f"I am picoagent {__version__}, running {model}."
        elif ask.what == "where":
            text = f"I run here at home, on this Raspberry Pi ({model}), {cloud}."
        else:
            other = "No: " if _OTHER_ASSISTANT.search(_said(ask.text)) else ""  # "are you ChatGPT?"
            text = (
                f"{other}I'm {name}, a private assistant running on this Raspberry Pi (picoagent {__version__}). "
                f'I think with {model} on the Pi {cloud}. Ask "what can you do?" to see what I can do here.'
            )
        return Answer(text, basis="the appliance's config and version", kind=self.kind)


class Abilities(TopicDefaults):
    """What the assistant can do here, from the running config."""

    kind: str = "abilities"
    overview: str = "all"

    def match(self, text: str) -> Ask | None:
        """An Ask for questions about what the assistant can do or control."""
        said = _said(text)
        if found := _CONNECTED.match(said):
            return Ask(
                self.kind, "channel", {"channel": (found["channel"] or found["channel2"]).replace("-", "")}, text=text
            )
        found = _TOOLS.match(said)
        tool = (found["tool"] or "").strip() if found else ""
        if found and (not tool or tool.replace(" ", "_") in _KNOWN_TOOL_WORDS):  # "do you have a dog": no tool
            return Ask(self.kind, "tool" if tool else "tools", {"tool": tool}, text=text)
        if _WILL_REMEMBER.match(said):
            return Ask(self.kind, "able", {"x": "remember things", "hypothetical": True}, text=text)
        for rule, what in ((_CHATS, "channels"), (_CLOUD, "cloud"), (_LEAVE, "cloud"), (_LEAVES_PI, "cloud")):
            if rule.search(said):
                return Ask(self.kind, what, text=text)
        if _CAN.search(said):
            return Ask(self.kind, "devices" if _ABOUT_DEVICES.search(said) else "all", text=text)
        if _PLAY.match(said):
            return Ask(self.kind, "play", text=text)
        found = _ABLE.match(said)
        rules = (_REMINDING, _WEATHERING, _REMEMBERING, _SWITCHING, _CANNOT)
        if found and any(r.match(found["x"]) for r in rules):
            if re.search(r"\d|\b(?:at|in|tomorrow|tonight|every)\b", found["x"]):
                return None  # "can you remind me at 7 ...": a request, the schedule desk's
            hypothetical = found["hypo"] not in ("can you", "could you") or bool(found["if"])
            return Ask(self.kind, "able", {"x": found["x"], "hypothetical": hypothetical}, text=text)
        return None

    async def answer(self, ask: Ask, facts: Facts) -> Answer | None:
        """The devices by room, and (for "what can you do") the channels, schedules, tools and cloud."""
        devices = devices_by_room(facts)
        registry = "the device registry (the config's devices)"
        if ask.what == "devices":
            return Answer(devices, basis=registry, kind=self.kind)
        if ask.what == "play":
            return Answer(
                f"No: I can't play anything here: I have no speaker or media player. {devices}", registry, self.kind
            )
        if ask.what == "able":
            return _able(str(ask.details["x"]), bool(ask.details["hypothetical"]), facts, devices)
        reach = ", ".join(["the web page and the terminal", *_ways_in(facts)])
        stays = "everything stays on the Pi: the cloud is not allowed (routing.mode: local_only)."
        cloud = "I may ask a cloud model when the small model on the Pi is not enough." if facts.cloud_allowed else ""
        usable = _usable_tools(facts)
        tools = "Tools the model may use: " + ", ".join(usable) + "." if usable else "I have no tools."
        if ask.what == "channel":
            wanted = str(ask.details["channel"])
            on = getattr(facts.config, wanted).enabled
            name = _CHANNEL_NAMES.get(wanted, wanted.title())
            said = (  # set up, not "connected": whether it reaches its servers now is the channel's state, not config
                f"{name} is set up here ({wanted}.enabled: true); whether it is connected right now, `picoagent "
                "channels list` or the status page shows."
                if on
                else f"No: {name} is not set up here (see the README's {name} section)."
            )
            return Answer(said, basis=f"the running config ({wanted}.enabled)", kind=self.kind)
        if ask.what == "tool":
            wanted = str(ask.details["tool"]).replace(" ", "_")
            have = [t for t in _usable_tools(facts) if wanted in t]
            said = f"Yes: {', '.join(have)}." if have else f"No: I have no {ask.details['tool']} tool here."
            if wanted == "calculator":
                said = "Yes: I do sums and unit conversions myself, exactly (and the model has a calculator tool)."
            return Answer(said, basis="the running config (tools)", kind=self.kind)
        if ask.what in ("channels", "cloud", "tools"):
            said = {"channels": f"You can reach me through {reach}.", "cloud": cloud or f"No: {stays}", "tools": tools}[
                ask.what
            ]
            return Answer(said, basis="the running config (channels, tools, routing)", kind=self.kind)
        lines = [
            devices,
            f"You can reach me through {reach}.",
            'I can set reminders and schedules ("remind me at 7 to take the bins out"), remember what you tell me, '
            "tell you the time, the date and the Pi's health, and do sums and unit conversions.",
        ]
        if facts.weather is not None:
            place = getattr(facts.weather, "place", "") or "the place set in the config"
            lines.append(f"I can tell you the weather forecast for {place}.")
        lines += [tools, cloud or stays[0].upper() + stays[1:]]
        return Answer(" ".join(lines), basis="the running config (devices, channels, tools, routing)", kind=self.kind)


def _ways_in(facts: Facts) -> list[str]:
    """The chat channels that are on, then the webhook bridges and the MQTT notify topic (walk 8: "what can you
    do?" named only the web page and the terminal while both answered)."""
    ways = [_CHANNEL_NAMES.get(c, c.title()) for c in facts.channels]
    if bridges := sorted(facts.config.webhooks):
        ways.append(f"the webhook bridge{'s' if len(bridges) > 1 else ''} {', '.join(bridges)}")
    if facts.config.mqtt.enabled:
        ways.append(f"MQTT ({facts.config.mqtt.base_topic}/notify)")
    return ways


_TASK_TOOLS = frozenset({"task_create", "task_status"})


def _usable_tools(facts: Facts) -> list[str]:
    """The model's tools, without the task tools where no model here can work a task (the Pi's cannot plan and
    the cloud may not be asked): task_create would only be refused (walk 8)."""
    from appliance.llm.models import plans

    tasks_work = plans(facts.model_name) if facts.model_name else True
    return sorted(t for t in facts.tools if tasks_work or facts.cloud_allowed or t not in _TASK_TOOLS)


def _able(x: str, hypothetical: bool, facts: Facts, devices: str) -> Answer | None:
    """Yes or no to "can you ...": reminders, the weather, remembering, a device; None for anything else (and for
    a device command that is no question: the device path does it)."""
    basis = "the running config (devices, scheduler, weather)"
    if _REMINDING.match(x):
        said = 'Yes: I can set reminders and schedules. Say "remind me at 7 to take the bins out".'
    elif _WEATHERING.match(x):
        place = getattr(facts.weather, "place", "") if facts.weather is not None else ""
        said = f"Yes: I have the forecast for {place}." if place else "No: no weather source is set up here."
    elif _REMEMBERING.match(x):
        said = 'Yes: tell me something to remember ("remember that ...") and ask me later.'
    elif _CANNOT.match(x):
        said = f"No: I can't {x.split()[0]} anything from here: I have no shop, phone or payment to use. {devices}"
    elif found := _SWITCHING.match(x):
        thing = found["thing"].strip()
        mine = names_a_device(thing, facts.devices.infos() if facts.devices is not None else [])
        if mine and not hypothetical:
            return None  # "can you turn the porch light on": a command, the device path's
        if mine:
            said = f'Yes: I can switch the {thing} here. Say "turn the {thing} on".'
        else:
            said = f"No: I have no {thing} here. {devices}"
        basis = "the device registry (the config's devices)"
    else:
        return None
    return Answer(said, basis, "abilities")


_GENERIC = frozenset({"light", "lights", "lamp", "lamps", "door", "switch", "sensor", "plug", "socket", "thing"})


def names_a_device(thing: str, infos: Sequence[DeviceInfo]) -> bool:
    """Whether ``thing`` ("porch lamp", "lights", "bedroom light") may be one of the devices: a word of it that
    is not generic is in a device's name, aliases or room, or every word of it is ("lights": the porch light).
    Words are compared by their first four letters ("lights", "light")."""
    for info in infos:
        words = " ".join([info.name.replace("_", " "), *(a.lower() for a in info.aliases), info.room or ""])
        known = {w[:4] for w in re.findall(r"[a-z0-9]+", words.replace("_", " "))}
        said = [w for w in re.findall(r"[a-z0-9]+", thing.lower()) if len(w) > 2 and w != "the"]
        if said and (any(w[:4] in known for w in said if w not in _GENERIC) or all(w[:4] in known for w in said)):
            return True
    return False


def devices_by_room(facts: Facts) -> str:
    """ "I have 3 devices: living room: fan (switch), living room (sensor); porch: porch light (switch)."."""
    infos = facts.devices.infos() if facts.devices is not None else []
    if not infos:
        return "No devices are set up here yet (add them under devices: in the config)."
    rooms: dict[str, list[str]] = defaultdict(list)
    for info in sorted(infos, key=lambda i: i.name):
        room = " ".join((info.room or "").replace("_", " ").split()).lower()
        rooms[room].append(f"{info.name.replace('_', ' ')} ({info.kind})")
    parts = [
        (f"{room}: " if room else "no room: ") + ", ".join(names)
        for room, names in sorted(rooms.items(), key=lambda item: (item[0] == "", item[0]))
    ]
    count = len(infos)
    return f"I have {count} device{'s' if count != 1 else ''}: " + "; ".join(parts) + "."


SELF = Self()
ABILITIES = Abilities()
